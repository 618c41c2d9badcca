// Fuzz target: the TOML config (cli::parse_config), with no environment overrides.
#include <string>

#include "cli/config.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(pf::fuzz::as_text(data, size));
  (void)pf::cli::parse_config(text, "fuzz.toml", {});
  return 0;
}
