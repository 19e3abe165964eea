// Who and what made a record: the principal and the project's version, as
// written into feature-set versions, model files and audit lines.
#pragma once

#include <string>
#include <string_view>

namespace hpcml {

// user@host, plus " job <SLURM_JOB_ID>" and " role <HPCML_ROLE>" when set.
std::string CurrentPrincipal();

// The project's version ("0.1.0"), from CMake's project().
std::string_view Version();

// What every command prints for --version: "<tool> <version>" (help2man reads
// the man pages' version from it).
std::string VersionLine(std::string_view tool);

// For commands without an argument parser (the probes), which must answer
// before starting MPI or CUDA: prints `help` for -h/--help or VersionLine for
// --version and returns 0; otherwise -1 (go on).
int AnswerHelpOrVersion(int argc, char** argv, std::string_view tool, const char* help);

}  // namespace hpcml
