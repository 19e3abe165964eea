#include "metrics_log.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hpcml::trainer {
namespace {

std::vector<nlohmann::json> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

class MetricsLogTest : public ::testing::Test {
 protected:
  std::string path_ = (std::filesystem::temp_directory_path() /
                       ("hpcml_metrics_log_test_" + std::to_string(::getpid()) + ".jsonl"))
                          .string();
  void TearDown() override { std::filesystem::remove(path_); }
};

TEST_F(MetricsLogTest, WritesOneTypedEventPerLine) {
  MetricsLog log;
  ASSERT_TRUE(log.Open(path_).ok());
  log.Write(RunStarted{GridShape{2, 2, 1}, "cpu", 64, 4, "1f1b", false, 10, 0.2});
  StepStats st;
  st.step = 1;
  st.loss = 0.5;
  st.bubble = 0.25;
  log.Write(StepDone{st, 0.25});
  log.Write(StepDone{st, std::nullopt});  // oversubscribed: not measured
  log.Write(RunStopped{7, "SIGTERM"});
  log.Write(RunDone{10, 1.0, 0.1, 0.02, std::nullopt, true, 0.2});
  const auto lines = ReadLines(path_);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0]["event"], "start");
  EXPECT_EQ(lines[0]["grid"], "2x2x1");
  EXPECT_EQ(lines[0]["microbatches"], 4);
  EXPECT_EQ(lines[1]["step"], 1);
  EXPECT_EQ(lines[1]["bubble"], 0.25);
  EXPECT_TRUE(lines[2]["bubble"].is_null());
  EXPECT_EQ(lines[3]["event"], "stopped");
  EXPECT_EQ(lines[3]["reason"], "SIGTERM");
  EXPECT_EQ(lines[4]["event"], "done");
  EXPECT_TRUE(lines[4]["mean_bubble"].is_null());
  EXPECT_EQ(lines[4]["oversubscribed"], true);
}

TEST_F(MetricsLogTest, EvalEventsCarryTheMetricsOfTheirLoss) {
  MetricsLog log;
  ASSERT_TRUE(log.Open(path_).ok());
  EvalMetrics ce;
  ce.step = 20;
  ce.rows = 300;
  ce.binary = true;
  ce.log_loss = 0.25;
  ce.accuracy = 0.9;
  ce.auc = 0.95;
  ce.positive_rate = 0.25;
  log.Write(EvalDone{ce, true, 20, 0.25, 0, 0.5});
  EvalMetrics mse;
  mse.loss = LossKind::kMse;
  mse.step = 30;
  mse.rows = 0;  // no rows: NaN figures are null
  log.Write(EvalDone{mse, false, 10, 0.5, 2, 0.1});
  log.Write(EarlyStopped{30, "rmse", 10, 0.5, 2});
  log.Write(RunDone{30, 1.0, 0.1, 0.02, 0.0, false, 0.0, true});
  const auto lines = ReadLines(path_);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["event"], "eval");
  EXPECT_EQ(lines[0]["step"], 20);
  EXPECT_EQ(lines[0]["auc"], 0.95);
  EXPECT_EQ(lines[0]["positive_rate"], 0.25);
  EXPECT_NEAR(lines[0]["base_rate_log_loss"].get<double>(), 0.5623351446188083, 1e-15);
  EXPECT_EQ(lines[0]["base_rate_accuracy"], 0.75);
  EXPECT_EQ(lines[0]["monitor"], "log_loss");
  EXPECT_EQ(lines[0]["value"], 0.25);
  EXPECT_EQ(lines[0]["best"], true);
  EXPECT_FALSE(lines[0].contains("rmse"));
  EXPECT_EQ(lines[1]["monitor"], "rmse");
  EXPECT_TRUE(lines[1]["rmse"].is_null());
  EXPECT_FALSE(lines[1].contains("log_loss"));
  EXPECT_EQ(lines[1]["best_step"], 10);
  EXPECT_EQ(lines[1]["evals_since_best"], 2);
  EXPECT_EQ(lines[2]["event"], "early_stop");
  EXPECT_EQ(lines[2]["patience"], 2);
  EXPECT_EQ(lines[3]["early_stopped"], true);
  const auto j = nlohmann::json::parse(EvalMetricsJson(ce));
  EXPECT_EQ(j.size(), 6u);  // log_loss, accuracy, auc and the base rate's three
  EXPECT_EQ(j["accuracy"], 0.9);
}

TEST_F(MetricsLogTest, ABadByteInTextIsReplacedNotThrown) {
  MetricsLog log;
  ASSERT_TRUE(log.Open(path_).ok());
  log.Write(RunStopped{3, "signal \xff"});
  const auto lines = ReadLines(path_);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["reason"], "signal \xEF\xBF\xBD");
}

TEST_F(MetricsLogTest, AClosedLogIgnoresEventsAndABadPathIsNamed) {
  MetricsLog closed;
  closed.Write(RunStopped{1, "x"});  // rank != 0 or no --metrics: nothing written
  MetricsLog log;
  Status s = log.Open("/nonexistent-dir/m.jsonl");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--metrics /nonexistent-dir/m.jsonl"), std::string::npos);
}

}  // namespace
}  // namespace hpcml::trainer
