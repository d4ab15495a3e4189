// `servesim models import CONFIG.json`: adds a model to the catalog (models/catalog/models/) from a
// Hugging Face config.json, without editing code. The conversion is models::import_hf_config
// (models/catalog/hf_import.h); this command picks the key and the folder, writes the file
// atomically, loads the catalog back and says what was added.
#pragma once

#include <ostream>
#include <string>

#include "scenarios/scenario.h"

namespace servesim::app {

struct ModelsImportOptions {
  std::string key;      // catalog key; empty: from the file name, else the config's _name_or_path
  std::string name;     // display name; empty: the last part of hf_id, else the key
  std::string hf_id;    // Hugging Face id ("Qwen/Qwen3-32B"); empty: _name_or_path if "org/name"
  std::string out_dir;  // catalog folder; empty: the data root's models/catalog/models
  std::string source;   // provenance text; empty: the hf_id's config.json and the file imported
  std::string license;  // license note; empty: a note to check the model's own license
  bool force = false;   // replace an existing file of the same key
  bool allow_approximate = false;  // see models::HfImportOptions::allow_approximate
  std::string expert_routing;       // a MoE model's default routing, e.g. power_law_1.2
  std::string expert_routing_note;  // where that estimate comes from
};

// Imports `config_path` into the catalog folder and prints the model added and how to use it.
// Returns 0. Throws InputError for an unreadable or unsupported config, a key that exists already
// without `force` (the existing file is left as it was), or a file that does not load back.
int run_models_import(const std::string& config_path, const ModelsImportOptions& options,
                      const scenarios::DataRoot& root, std::ostream& out);

}  // namespace servesim::app
