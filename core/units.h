// Unit constants shared by the memory accounting and its messages.
#pragma once

namespace servesim {

// Bytes in one GiB (2^30), as a double for sizes printed or computed in GiB.
inline constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace servesim
