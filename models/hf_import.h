// Importing a Hugging Face `config.json` into servesim's model catalog (models/catalog/models/).
//
// Contract:
// - import_hf_config is a pure function from a parsed config.json to the catalog document that
//   ModelCatalog::load (hardware.h) reads: the architecture fields copied from the config, the
//   derived counts (param_count, param_count_active_per_token, param_count_breakdown,
//   kv_cache_bytes_per_token_16bit, weights_bytes_16bit), provenance, and the config verbatim as
//   raw_config. The counts follow the rule the shipped catalog files were computed with:
//   embeddings + (untied) LM head + per layer (attention projections, their biases where the
//   architecture has them, Qwen3's per-head q/k RMSNorm weights, MLP or router + experts, two
//   RMSNorms) + the final norm. Re-importing a shipped file's raw_config reproduces its counts
//   exactly (tests/unit/models/hf_import_test.cc).
// - Supported model_type values: see supported_hf_model_types(). Dense: llama, mistral, qwen2,
//   qwen3. MoE: mixtral, qwen2_moe, qwen3_moe.
// - Errors throw InputError naming the config file, the config key and what was expected. A
//   config whose architecture servesim's cost model cannot express (multi-head latent attention,
//   sliding-window attention layers) is refused, never approximated. Parts the cost model leaves
//   out but whose weights are counted exactly (MoE shared experts, dense MLP layers between MoE
//   layers) are refused unless HfImportOptions::allow_approximate is set; the document then lists
//   them under "cost_model_approximations".
// - read_hf_config and write_catalog_model are the only functions here that touch the file system.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/hardware.h"

namespace servesim::models {

struct HfImportOptions {
  std::string config_file;   // where the config came from; named in errors and the default source
  std::string key;           // catalog key (the file stem); the display name's last fallback
  std::string name;          // display name; empty: the last part of hf_id, else the key
  std::string hf_id;         // e.g. "Qwen/Qwen3-32B"; empty: _name_or_path when it is "org/name"
  std::string source;        // provenance; empty: "<hf_id> config.json, imported from <file>"
  std::string license_note;  // empty: a note to check the model's own license
  bool allow_approximate = false;  // import shared experts / dense-between-MoE layers (see above)
};

// The model_type values import_hf_config accepts, sorted.
std::vector<std::string> supported_hf_model_types();

// Reads and parses a config.json, keeping its key order. Throws InputError (with the line of a
// syntax error) when the file cannot be read or is not a JSON object.
nlohmann::ordered_json read_hf_config(const std::string& path);

// The catalog document for `config` (a nlohmann::json converts implicitly; its keys are then
// sorted, as Hugging Face writes them anyway). Throws InputError as described above.
nlohmann::ordered_json import_hf_config(const nlohmann::ordered_json& config,
                                        const HfImportOptions& options);

// The catalog key a config file suggests: its file name without ".json" and a "config" suffix
// ("Qwen--Qwen3-32B.config.json", "Qwen--Qwen3-32B_config.json"), after the last "--" (the
// org--name convention), lower-cased: "qwen3-32b". A bare "config.json" falls back to the last
// part of `_name_or_path`. Returns "" when neither gives a valid key.
std::string default_catalog_key(const std::string& config_path,
                                const nlohmann::ordered_json& config);

// True for a usable catalog key: lower-case letters, digits, '.', '-' and '_', starting with a
// letter or digit.
bool valid_catalog_key(const std::string& key);

struct WrittenModel {
  std::string path;           // the file written, <dir>/<key>.json
  bool replaced = false;      // an existing file of that key was overwritten (force)
  ModelSpec spec;             // the model as ModelCatalog::load reads it back
  size_t catalog_models = 0;  // models in `dir` after the write, all loaded
};

// Writes `doc` as <dir>/<key>.json: first alone into a scratch folder inside `dir` and loaded
// through ModelCatalog::load, then moved into place atomically (rename; without `force`, a hard
// link that fails when the file exists, so a concurrent writer is not clobbered), then the whole
// of `dir` is loaded again. REQUIRES: valid_catalog_key(key).
// Throws InputError naming <dir>/<key>.json when it exists and `force` is false (the file is left
// untouched), and whatever ModelCatalog::load throws when the document or the folder does not load.
WrittenModel write_catalog_model(const nlohmann::ordered_json& doc, const std::string& key,
                                 const std::string& dir, bool force);

}  // namespace servesim::models
