// Command-line helpers shared by the commands (CLI11, header-only).
#pragma once

#include <CLI/CLI.hpp>

#include <initializer_list>
#include <string>
#include <vector>

namespace hpcml {

// An option whose words are an enum's: Name(e) (found by argument-dependent
// lookup) for each of `values`, stored as the enum. Any other word is a usage
// error naming the choices, as CLI::IsMember gives; the help shows the
// default's word.
template <typename Enum>
CLI::Option* AddEnumOption(CLI::App& app, const std::string& name, Enum* value,
                           std::initializer_list<Enum> values, const std::string& help) {
  std::vector<std::string> words;
  for (Enum e : values) words.emplace_back(Name(e));
  std::vector<Enum> choices(values);
  return app
      .add_option_function<std::string>(
          name,
          [value, words, choices](const std::string& word) {
            for (std::size_t i = 0; i < words.size(); ++i)
              if (words[i] == word) *value = choices[i];
          },
          help)
      ->check(CLI::IsMember(words))
      ->default_str(std::string(Name(*value)));
}

}  // namespace hpcml
