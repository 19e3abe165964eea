// MPI helpers every MPI program of hpcml shares: gathering text and agreeing
// on an outcome, so that no rank is left waiting for a peer that gave up.
// All functions are collective over `comm`.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "hpcml/common/status.hpp"

namespace hpcml {

// One string per rank, in rank order, at `root`; an empty vector elsewhere.
std::vector<std::string> GatherStrings(MPI_Comm comm, const std::string& mine, int root = 0);

// One string per rank, in rank order, at every rank.
std::vector<std::string> AllGatherStrings(MPI_Comm comm, const std::string& mine);

// Every rank passes its local Status and every rank gets back the Status of
// the lowest failing rank ("rank N: ..." when N != 0; OK when none failed), so
// all ranks take the same branch.
Status AgreeOnStatus(MPI_Comm comm, const Status& local);

// The largest of the ranks' exit codes, at every rank: a launcher sees one answer.
int AgreeOnExitCode(MPI_Comm comm, int code);

}  // namespace hpcml
