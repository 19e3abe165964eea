#include "hpcml/trees/checkpoint.hpp"

#include <hdf5.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "booster_file.hpp"
#include "hpcml/common/h5.hpp"
#include "hpcml/common/json.hpp"

namespace hpcml::trees {
namespace {

namespace fs = std::filesystem;

std::string FileName(std::int64_t round) {
  return fmt::format("gbdt-round-{:012d}.h5", round);
}

// Rounds of the complete checkpoints in `dir`, newest first.
std::vector<std::int64_t> ListRounds(const std::string& dir) {
  static const std::regex kName(R"(gbdt-round-(\d{12})\.h5)");
  std::vector<std::int64_t> rounds;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (std::regex_match(name, m, kName)) rounds.push_back(std::stoll(m[1].str()));
  }
  std::sort(rounds.rbegin(), rounds.rend());
  return rounds;
}

nlohmann::ordered_json RoundsJson(const std::vector<RoundMetrics>& rounds) {
  auto out = nlohmann::ordered_json::array();
  for (const RoundMetrics& r : rounds) {
    nlohmann::ordered_json j = {{"round", r.round}, {"seconds", r.seconds}};
    if (r.train_loss) j["train_loss"] = *r.train_loss;
    if (r.val_loss) j["val_loss"] = *r.val_loss;
    if (r.val_auc) j["val_auc"] = *r.val_auc;
    out.push_back(std::move(j));
  }
  return out;
}

Result<std::vector<RoundMetrics>> ParseRounds(const std::string& text) {
  std::vector<RoundMetrics> out;
  try {
    for (const auto& j : nlohmann::json::parse(text)) {
      RoundMetrics r;
      r.round = j.at("round").get<std::int64_t>();
      r.seconds = j.at("seconds").get<double>();
      if (j.contains("train_loss")) r.train_loss = j["train_loss"].get<double>();
      if (j.contains("val_loss")) r.val_loss = j["val_loss"].get<double>();
      if (j.contains("val_auc")) r.val_auc = j["val_auc"].get<double>();
      out.push_back(r);
    }
  } catch (const nlohmann::json::exception& e) {
    return Corrupt("rounds: {}", e.what());
  }
  return out;
}

Result<GbdtCheckpoint> Load(const std::string& path) {
  HPCML_ASSIGN_OR_RETURN(BoosterFile file, OpenBoosterFile(path));
  if (file.format != kGbdtCheckpointFormat) return Corrupt("{}: not a GBDT checkpoint", path);
  const hid_t g = file.file.get();
  GbdtCheckpoint c;
  HPCML_ASSIGN_OR_RETURN(c.round, h5::ReadIntAttr(g, "round"));
  HPCML_ASSIGN_OR_RETURN(c.run_key, h5::ReadStringAttr(g, "run_key"));
  HPCML_ASSIGN_OR_RETURN(c.booster, ReadBooster(g, path));
  HPCML_ASSIGN_OR_RETURN(std::string rounds, h5::ReadStringAttr(g, "rounds"));
  auto parsed = ParseRounds(rounds);
  if (!parsed.ok()) return parsed.status().WithContext(path);
  c.rounds = std::move(*parsed);
  if (static_cast<std::int64_t>(c.rounds.size()) != c.round) {
    return Corrupt("{}: {} rounds of figures for round {}", path, c.rounds.size(), c.round);
  }
  return c;
}

}  // namespace

Status SaveGbdtCheckpoint(const std::string& dir, int keep, const GbdtCheckpoint& c) {
  if (keep < 1) return InvalidArgument("--checkpoint-keep must be >= 1");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return IoError("{}: cannot create the checkpoint directory: {}", dir, ec.message());
  const std::string path = (fs::path(dir) / FileName(c.round)).string();
  auto attrs = [&](hid_t g) -> Status {
    HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "round", c.round));
    HPCML_RETURN_IF_ERROR(h5::WriteAttr(g, "run_key", c.run_key));
    return h5::WriteAttr(g, "rounds", JsonText(RoundsJson(c.rounds)));
  };
  HPCML_RETURN_IF_ERROR(WriteBoosterFile(path, kGbdtCheckpointFormat, c.booster, attrs));
  const std::vector<std::int64_t> rounds = ListRounds(dir);
  for (std::size_t i = static_cast<std::size_t>(keep); i < rounds.size(); ++i) {
    fs::remove(fs::path(dir) / FileName(rounds[i]), ec);
  }
  return Status::Ok();
}

std::string GbdtCheckpointHeader(const GbdtCheckpoint& c) {
  return JsonText(nlohmann::ordered_json{
      {"round", c.round}, {"run_key", c.run_key}, {"rounds", RoundsJson(c.rounds)}});
}

Result<GbdtCheckpoint> ParseGbdtCheckpointHeader(const std::string& text, std::string booster) {
  GbdtCheckpoint c;
  try {
    const auto j = nlohmann::json::parse(text);
    c.round = j.at("round").get<std::int64_t>();
    c.run_key = j.at("run_key").get<std::string>();
    HPCML_ASSIGN_OR_RETURN(c.rounds, ParseRounds(j.at("rounds").dump()));
  } catch (const nlohmann::json::exception& e) {
    return Corrupt("a checkpoint's header: {}", e.what());
  }
  c.booster = std::move(booster);
  return c;
}

Result<std::optional<GbdtCheckpoint>> LoadLatestGbdtCheckpoint(const std::string& dir,
                                                               std::vector<std::string>* warnings) {
  for (std::int64_t round : ListRounds(dir)) {
    auto c = Load((fs::path(dir) / FileName(round)).string());
    if (c.ok()) return std::optional<GbdtCheckpoint>(std::move(*c));
    if (warnings) warnings->push_back(fmt::format("skipped: {}", c.status().message()));
  }
  return std::optional<GbdtCheckpoint>();
}

}  // namespace hpcml::trees
