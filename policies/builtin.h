// Registration of the built-in policies. Call once before looking policies up by name; calling it
// again is harmless.
#pragma once

namespace servesim::policies {

void register_builtin_policies();

}  // namespace servesim::policies
