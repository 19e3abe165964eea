// hpcml-fcache: the command-line tool over the featurecache library.
#pragma once

namespace hpcml::featurecache {

// Runs the tool; returns the exit status: 0 success, 1 error (message on
// stderr as "hpcml-fcache: <file>: ..."), 2 bad usage, 3 `diff --exit-code`
// found differences.
int RunCli(int argc, char** argv);

}  // namespace hpcml::featurecache
