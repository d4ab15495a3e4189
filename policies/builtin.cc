#include "policies/builtin.h"

#include <mutex>

#include "policies/coloc.h"
#include "policies/disagg.h"
#include "policies/dllm.h"
#include "policies/dopd/dopd.h"
#include "policies/dynaserve.h"
#include "policies/engines/engine_model.h"
#include "policies/routers.h"

namespace servesim::policies {

void register_builtin_policies() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_coloc();
    register_disagg();
    dopd::register_dopd();
    register_dynaserve();
    register_routers();
    register_engine_models();
    register_dllm_policies();
  });
}

}  // namespace servesim::policies
