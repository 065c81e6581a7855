#include <iostream>

#include "cli/commands.h"
#include "engine/engine.h"

namespace helium::cli {

void add_tune_command(CLI::App& app, TuneOptions& o) {
  CLI::App* tune = app.add_subcommand(
      "tune", "Re-time the GPU kernel configurations for a model's shapes and rewrite the tuning cache");
  tune->add_option("-m,--model", o.model, "Model directory; default: the embedded model");
  tune->add_option("--device", o.device, "Device to tune: auto, cpu or cuda (the CPU has nothing to tune)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  add_load_format_option(tune, o.load_format, "weights, or dummy: only config.json is read");
}

int tune_command(const TuneOptions& o) {
  EngineOptions eo;
  eo.device = o.device;
  eo.load_format = load_format_choice(o.load_format);
  const std::string model = o.model.empty() ? default_model_path() : o.model;
  auto device = Engine::tune(model, eo);
  if (!device.is_ok()) {
    std::cerr << "helium: " << device.error_message() << "\n";
    return 1;
  }
  if (device.value().rfind("cpu", 0) == 0) {
    std::cout << "the CPU backend has no launch configurations to tune\n";
    return 0;
  }
  std::cout << "tuned " << model << " on " << device.value()
            << " (cache: $HELIUM_CACHE_DIR or ~/.cache/helium/tune)\n";
  return 0;
}

}  // namespace helium::cli
