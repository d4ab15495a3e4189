#include "policies/builtin.h"

#include <mutex>

#include "policies/coloc.h"
#include "policies/disagg.h"
#include "policies/routers.h"

namespace servesim::policies {

void register_builtin_policies() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_coloc();
    register_disagg();
    register_routers();
  });
}

}  // namespace servesim::policies
