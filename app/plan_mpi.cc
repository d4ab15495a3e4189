// The planner's rank transport: MPI when the build found it (SERVESIM_HAVE_MPI), else one rank.
#include <algorithm>
#include <cstdlib>
#include <memory>

#include "app/plan_internal.h"

#ifdef SERVESIM_HAVE_MPI
#include <mpi.h>
#endif

namespace servesim::app {
namespace {

class SingleProcess : public RankTransport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::vector<std::string> gather(const std::string& payload) override { return {payload}; }
};

#ifdef SERVESIM_HAVE_MPI
// MPI is initialised on first use and finalised at exit (the planner is the only MPI user).
class MpiTransport : public RankTransport {
 public:
  MpiTransport() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::vector<std::string> gather(const std::string& payload) override {
    // Payloads can exceed 2 GiB in principle; send them in chunks of at most 1 GiB.
    constexpr size_t kChunk = size_t{1} << 30;
    const unsigned long long mine = payload.size();
    std::vector<unsigned long long> sizes(static_cast<size_t>(size_));
    MPI_Gather(&mine, 1, MPI_UNSIGNED_LONG_LONG, sizes.data(), 1, MPI_UNSIGNED_LONG_LONG, 0,
               MPI_COMM_WORLD);
    if (rank_ != 0) {
      for (size_t off = 0; off < payload.size(); off += kChunk) {
        const int n = static_cast<int>(std::min(kChunk, payload.size() - off));
        MPI_Send(payload.data() + off, n, MPI_CHAR, 0, 7, MPI_COMM_WORLD);
      }
      return {};
    }
    std::vector<std::string> out(static_cast<size_t>(size_));
    out[0] = payload;
    for (int r = 1; r < size_; ++r) {
      std::string& s = out[static_cast<size_t>(r)];
      s.resize(sizes[static_cast<size_t>(r)]);
      for (size_t off = 0; off < s.size(); off += kChunk) {
        const int n = static_cast<int>(std::min(kChunk, s.size() - off));
        MPI_Recv(s.data() + off, n, MPI_CHAR, r, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      }
    }
    return out;
  }

 private:
  int rank_ = 0;
  int size_ = 1;
};

void finalize_mpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}
#endif

}  // namespace

std::unique_ptr<RankTransport> make_rank_transport() {
#ifdef SERVESIM_HAVE_MPI
  // Only under a launcher: a plain `servesim plan` never touches MPI.
  const bool launched = std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") ||
                        std::getenv("PMIX_RANK");
  if (launched) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      MPI_Init(nullptr, nullptr);
      std::atexit(finalize_mpi);
    }
    return std::make_unique<MpiTransport>();
  }
#endif
  return std::make_unique<SingleProcess>();
}

}  // namespace servesim::app
