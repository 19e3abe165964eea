#include "hpcml/common/mpi.hpp"

#include <cstdint>

namespace hpcml {
namespace {

// Displacements of the pieces whose lengths are `lens`; returns the total.
int Offsets(const std::vector<int>& lens, std::vector<int>* offs) {
  offs->assign(lens.size(), 0);
  int total = 0;
  for (std::size_t i = 0; i < lens.size(); ++i) {
    (*offs)[i] = total;
    total += lens[i];
  }
  return total;
}

std::vector<std::string> Cut(const std::string& all, const std::vector<int>& lens,
                             const std::vector<int>& offs) {
  std::vector<std::string> out;
  out.reserve(lens.size());
  for (std::size_t i = 0; i < lens.size(); ++i) {
    out.push_back(all.substr(static_cast<std::size_t>(offs[i]), static_cast<std::size_t>(lens[i])));
  }
  return out;
}

}  // namespace

std::vector<std::string> GatherStrings(MPI_Comm comm, const std::string& mine, int root) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<std::size_t>(size)), offs;
  MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, root, comm);
  const int total = Offsets(lens, &offs);
  std::string all(static_cast<std::size_t>(rank == root ? total : 0), '\0');
  MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR, root,
              comm);
  if (rank != root) return {};
  return Cut(all, lens, offs);
}

std::vector<std::string> AllGatherStrings(MPI_Comm comm, const std::string& mine) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<std::size_t>(size)), offs;
  MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm);
  std::string all(static_cast<std::size_t>(Offsets(lens, &offs)), '\0');
  MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR, comm);
  return Cut(all, lens, offs);
}

Status AgreeOnStatus(MPI_Comm comm, const Status& local) {
  int size = 0, rank = 0;
  MPI_Comm_size(comm, &size);
  MPI_Comm_rank(comm, &rank);
  int mine = local.ok() ? size : rank;
  int first = size;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
  if (first == size) return Status::Ok();
  // The first failing rank tells everyone what went wrong.
  int code = static_cast<int>(local.code());
  std::string text = local.message();
  std::int64_t len = static_cast<std::int64_t>(text.size());
  MPI_Bcast(&code, 1, MPI_INT, first, comm);
  MPI_Bcast(&len, 1, MPI_INT64_T, first, comm);
  text.resize(static_cast<std::size_t>(len));
  MPI_Bcast(text.data(), static_cast<int>(len), MPI_CHAR, first, comm);
  if (first != 0 && size > 1) text = fmt::format("rank {}: {}", first, text);
  return Status(static_cast<StatusCode>(code), text);
}

int AgreeOnExitCode(MPI_Comm comm, int code) {
  int worst = 0;
  MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, comm);
  return worst;
}

}  // namespace hpcml
