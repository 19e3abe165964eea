// hpcml-mpi-probe: checks that an MPI launch works end to end.
//
// Every rank reports its host, pid, CPU affinity and Slurm ids; rank 0 prints
// them in rank order. The ranks then check an all-reduce and a ring exchange,
// of one int and of 1 MiB (past every eager limit: on one node Open MPI then
// copies straight between the ranks with process_vm_readv, which a step's
// confinement must still allow).
// Exit status (common/exit_codes.hpp), the same on every rank: 0 when every
// check passes on every rank, 3 when one fails (a wrong sum or exchange, not
// the --expect-ranks world), 2 for a bad argument. An MPI error aborts the
// job (MPI_ERRORS_ARE_FATAL): the launcher's code.
//
//   hpcml-mpi-probe [--expect-ranks N]
//   hpcml-mpi-probe --help | --version     (answered without starting MPI)
#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "hpcml/common/exit_codes.hpp"
#include "hpcml/common/identity.hpp"

namespace {

// The --help text, in CLI11's layout like the other commands (help2man makes
// the man page from it).
constexpr const char* kHelp =
    "hpcml-mpi-probe: check that an MPI launch works end to end (host, pid, CPU affinity and\n"
    "Slurm ids of every rank, then an all-reduce and a ring exchange of 1 int and 1 MiB)\n"
    "Usage: hpcml-mpi-probe [OPTIONS]\n"
    "\n"
    "Options:\n"
    "  -h,--help                   Print this help message and exit\n"
    "  --version                   Display program version information and exit\n"
    "  --expect-ranks INT          Fail unless the world has this many ranks\n"
    "\n";

std::string CpuList() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "?";
  std::string out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    int end = c;
    while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, &set)) ++end;
    if (!out.empty()) out += ',';
    out += end == c ? fmt::format("{}", c) : fmt::format("{}-{}", c, end);
    c = end;
  }
  return out;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "-";
}

}  // namespace

int main(int argc, char** argv) {
  // --help and --version need no MPI: answered before MPI_Init (also outside
  // any launcher, as help2man runs them).
  const std::string help =
      kHelp + hpcml::ExitStatusHelp({{hpcml::kExitCheckFailed,
                                      "a check failed on a rank (a wrong sum or exchange, not\n"
                                      "      the --expect-ranks world)"}});
  if (int rc = hpcml::AnswerHelpOrVersion(argc, argv, "hpcml-mpi-probe", help.c_str()); rc >= 0) {
    return rc;
  }
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  // Every rank reads the same argv: a usage error is every rank's, unagreed.
  int expect = -1;
  std::string usage;
  for (int i = 1; i < argc && usage.empty(); ++i) {
    if (std::strcmp(argv[i], "--expect-ranks") != 0) {
      usage = fmt::format("unknown argument '{}' (see --help)", argv[i]);
    } else if (i + 1 == argc) {
      usage = "--expect-ranks: needs a number of ranks";
    } else {
      const std::string_view v = argv[++i];
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), expect);
      if (ec != std::errc() || end != v.data() + v.size() || expect < 1) {
        usage = fmt::format("--expect-ranks '{}': not a positive number of ranks", v);
      }
    }
  }
  if (!usage.empty()) {
    if (rank == 0) std::fprintf(stderr, "hpcml-mpi-probe: %s\n", usage.c_str());
    MPI_Finalize();
    return hpcml::kExitUsage;
  }

  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string line =
      fmt::format("rank {}/{} host {} pid {} cpus {} slurm_job {} slurm_procid {}", rank, size,
                  host, getpid(), CpuList(), Env("SLURM_JOB_ID"), Env("SLURM_PROCID"));

  // Gather the report lines at rank 0 (fixed-size records keep this simple).
  constexpr int kLine = 256;
  std::vector<char> mine(kLine, '\0');
  std::strncpy(mine.data(), line.c_str(), kLine - 1);
  std::vector<char> all(rank == 0 ? static_cast<size_t>(kLine) * size : 0);
  MPI_Gather(mine.data(), kLine, MPI_CHAR, all.data(), kLine, MPI_CHAR, 0, MPI_COMM_WORLD);

  // All-reduce: the sum of ranks is size*(size-1)/2 everywhere.
  long sum = 0, me = rank;
  MPI_Allreduce(&me, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  bool ok = sum == static_cast<long>(size) * (size - 1) / 2;

  // Ring: everyone receives its left neighbour's rank.
  int left = (rank + size - 1) % size, right = (rank + 1) % size, got = -1;
  MPI_Sendrecv(&rank, 1, MPI_INT, right, 7, &got, 1, MPI_INT, left, 7, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  ok = ok && got == left;
  constexpr std::size_t kLarge = 1 << 20;
  std::vector<char> send(kLarge, static_cast<char>(rank)), recv(kLarge, -1);
  MPI_Sendrecv(send.data(), static_cast<int>(kLarge), MPI_CHAR, right, 8, recv.data(),
               static_cast<int>(kLarge), MPI_CHAR, left, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  ok = ok &&
       std::all_of(recv.begin(), recv.end(), [&](char c) { return c == static_cast<char>(left); });
  if (expect >= 0) ok = ok && size == expect;

  int all_ok = 0, mine_ok = ok ? 1 : 0;
  MPI_Allreduce(&mine_ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0) {
    for (int r = 0; r < size; ++r)
      std::printf("hpcml-mpi-probe: %s\n", &all[static_cast<size_t>(r) * kLine]);
    if (expect >= 0 && size != expect) {
      std::printf("hpcml-mpi-probe: FAILED: %d ranks, expected %d\n", size, expect);
    }
    std::printf("hpcml-mpi-probe: %s: allreduce sum %ld, ring exchange, %d ranks\n",
                all_ok ? "ok" : "FAILED", sum, size);
    std::fflush(stdout);
  }
  MPI_Finalize();
  return all_ok ? hpcml::kExitOk : hpcml::kExitCheckFailed;
}
