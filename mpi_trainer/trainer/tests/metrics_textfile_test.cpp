#include "metrics_textfile.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "hpcml/common/fs.hpp"

namespace hpcml::trainer {
namespace {

TrainerGauges Sample() {
  TrainerGauges g;
  g.job_id = "42";
  g.attempt = 1;
  g.step = 20;
  g.steps = 100;
  g.loss = 0.25;
  g.samples_per_s = 1000;
  g.bubble = 0.125;
  g.last_checkpoint_unix = 1700000000;
  g.now_unix = 1700000030.5;
  return g;
}

TEST(MetricsTextfile, FormatsEveryGaugeWithTheJobLabel) {
  const std::string t = FormatTrainerGauges(Sample());
  for (const char* line : {
           "# TYPE hpcml_train_step gauge\nhpcml_train_step{job_id=\"42\"} 20\n",
           "hpcml_train_target_steps{job_id=\"42\"} 100\n",
           "hpcml_train_loss{job_id=\"42\"} 0.25\n",
           "hpcml_train_samples_per_second{job_id=\"42\"} 1000\n",
           "hpcml_train_pipeline_bubble_ratio{job_id=\"42\"} 0.125\n",
           "hpcml_train_last_checkpoint_timestamp_seconds{job_id=\"42\"} 1700000000\n",
           "hpcml_train_seconds_since_checkpoint{job_id=\"42\"} 30.5\n",
           "hpcml_train_attempt{job_id=\"42\"} 1\n",
           "hpcml_train_metrics_timestamp_seconds{job_id=\"42\"} 1700000030.5\n",
       }) {
    EXPECT_NE(t.find(line), std::string::npos) << line << "\nin:\n" << t;
  }
}

TEST(MetricsTextfile, LeavesOutWhatIsNotKnown) {
  TrainerGauges g = Sample();
  g.job_id.clear();
  g.loss.reset();
  g.bubble.reset();
  g.last_checkpoint_unix.reset();
  const std::string t = FormatTrainerGauges(g);
  EXPECT_NE(t.find("hpcml_train_step 20\n"), std::string::npos) << t;
  EXPECT_EQ(t.find("hpcml_train_loss"), std::string::npos);
  EXPECT_EQ(t.find("bubble"), std::string::npos);
  EXPECT_EQ(t.find("checkpoint"), std::string::npos);
  EXPECT_EQ(t.find("job_id"), std::string::npos);
}

TEST(MetricsTextfile, WritesWholeFilesAndNamesTheOptionOnError) {
  const std::string dir = std::filesystem::temp_directory_path() /
                          ("hpcml-textfile-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  MetricsTextfile f;
  EXPECT_TRUE(f.Write(Sample()).ok());  // never opened: nothing happens
  Status s = f.Open(dir + "/train.txt", Sample());
  EXPECT_FALSE(s.ok());
  EXPECT_NE(
      s.message().find("--metrics-textfile " + dir + "/train.txt: the name must end in .prom"),
      std::string::npos)
      << s.message();
  s = f.Open(dir + "/missing/train.prom", Sample());
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no directory"), std::string::npos) << s.message();
  EXPECT_FALSE(f.is_open());
  ASSERT_TRUE(f.Open(dir + "/train.prom", Sample()).ok());
  TrainerGauges g = Sample();
  g.step = 30;
  ASSERT_TRUE(f.Write(g).ok());
  auto text = ReadFile(dir + "/train.prom");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, FormatTrainerGauges(g));
  // Only the file itself: no temporary left beside it.
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hpcml::trainer
