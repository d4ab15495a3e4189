#include "app/dopd_ratio.h"

#include <cmath>

#include <fmt/format.h>

#include "scenarios/cost_models.h"
#include "core/error.h"

namespace servesim::app {

policies::dopd::RatioResult print_dopd_ratio(const scenarios::Scenario& s,
                                             const scenarios::DataRoot& root,
                                             const DopdRatioOptions& options, std::ostream& out) {
  const scenarios::GroupPlan* prefill = nullptr;
  const scenarios::GroupPlan* decode = nullptr;
  for (const auto& g : s.groups) {
    if (g.role == sim::InstanceRole::kPrefill && !prefill) prefill = &g;
    if (g.role == sim::InstanceRole::kDecode && !decode) decode = &g;
  }
  if (!prefill || !decode) {
    throw ConfigError(s.source, {{"policy", fmt::format("dopd-ratio needs a disaggregated policy "
                                                        "(prefill and decode instances); policy {} "
                                                        "has none of one role", s.policy.type)}});
  }
  double isl = 0, osl = 0;
  if (!options.isl || !options.osl) {
    const Workload w = scenarios::build_workload(s, root);
    for (const auto& r : w.requests) {
      isl += static_cast<double>(r.prompt_tokens);
      osl += static_cast<double>(r.output_tokens);
    }
    isl /= static_cast<double>(w.requests.size());
    osl /= static_cast<double>(w.requests.size());
  }
  isl = options.isl.value_or(isl);
  osl = options.osl.value_or(osl);

  const auto& cat = scenarios::Catalogs::get(root);
  const models::ModelSpec& model = cat.models.get(s.model);
  const models::GpuSpec& gpu = cat.gpus.get(s.cluster.gpu);
  const scenarios::CostModelChoice choice{s.cost_type, s.cost, s.cost_custom_allreduce};
  const auto p_cost = scenarios::make_cost_model(
      choice, {&model, &gpu, prefill->tp, s.cluster.weight_dtype, s.cluster.kv_dtype}, root);
  const auto d_cost = scenarios::make_cost_model(
      choice, {&model, &gpu, decode->tp, s.cluster.weight_dtype, s.cluster.kv_dtype}, root);

  policies::dopd::RatioInputs in;
  in.prefill_cost = p_cost.get();
  in.decode_cost = d_cost.get();
  in.decode_num_blocks = decode->memory.num_blocks;
  in.block_size = decode->memory.block_size;
  in.l_in = isl;
  in.l_out = osl;
  in.tpot_slo = s.slo.tpot;
  in.eta = options.eta;
  const policies::dopd::RatioResult r = policies::dopd::compute_pd_ratio(in);

  const int t = decode->tp;
  const double s_kv = static_cast<double>(model.kv_bytes_per_token(s.cluster.kv_dtype));
  const double m_kv = static_cast<double>(decode->memory.kv_pool_bytes_per_gpu) * t;
  const double m_model = static_cast<double>(decode->memory.weight_bytes_per_gpu) * t;
  out << fmt::format("scenario      {} ({})\n", s.name, s.source);
  out << fmt::format("model         {} on {}, weights {}, KV {} ({:.1f} KiB per token)\n", s.model,
                     gpu.name, models::dtype_name(s.cluster.weight_dtype),
                     models::dtype_name(s.cluster.kv_dtype), s_kv / 1024);
  out << fmt::format("P instance    tp {}; D instance tp {}, {} KV blocks of {} tokens\n",
                     prefill->tp, t, decode->memory.num_blocks, decode->memory.block_size);
  out << fmt::format("lengths       l_in {:.1f}, l_out {:.1f}, l_ctx = l_in + l_out/2 = {}\n", isl,
                     osl, r.ctx_tokens);
  out << fmt::format("eq. 11        M_kv = t u M_gpu - M_model - M_act = {:.2f} GB "
                     "(weights {:.2f} GB)\n", m_kv / 1e9, m_model / 1e9);
  if (s.slo.tpot) {
    const double v_bw = t * gpu.mem_bw_bytes_per_s * to_seconds(*s.slo.tpot) - m_model;
    out << fmt::format("eq. 12        V_bw = t B_hbm T_SLO - M_model = {:.2f} GB (T_SLO {:.0f} ms)"
                       " -> {} requests at l_ctx ({}-bound)\n", v_bw / 1e9,
                       to_seconds(*s.slo.tpot) * 1e3,
                       static_cast<int64_t>(std::floor(std::max(0.0, v_bw) / (s_kv * r.ctx_tokens))),
                       v_bw < m_kv ? "bandwidth" : "capacity");
  } else {
    out << "eq. 12        no TPOT SLO: no bandwidth bound\n";
  }
  out << fmt::format("eq. 13        C_kv = floor(blocks / ceil(l_ctx / block)) = {}; C_bw (largest "
                     "decode batch within the TPOT SLO on the cost model) = {}; C_max = {}{}\n",
                     r.c_kv, r.c_bw, r.c_max,
                     options.eta < 1.0 ? fmt::format(" (eta {:.2f})", options.eta) : "");
  out << fmt::format("profiled      T_p = TTFT_prof(l_in) = {:.1f} ms; T_d = ITL_prof(C_max, l_ctx)"
                     " = {:.1f} ms\n", r.t_p_s * 1e3, r.t_d_s * 1e3);
  out << fmt::format("eq. 14        R* = N_P/N_D = C_max T_p / (l_out T_d) = {} x {:.4f} / ({:.1f} x "
                     "{:.4f}) = {:.2f}\n", r.c_max, r.t_p_s, osl, r.t_d_s, r.ratio);
  out << fmt::format("per D         {:.2f} prefill instances of tp {} (ceil: {})\n", r.ratio,
                     prefill->tp, static_cast<int64_t>(std::ceil(r.ratio - 1e-9)));
  return r;
}

}  // namespace servesim::app
