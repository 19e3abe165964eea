#include "hpcml/common/prometheus.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace hpcml {
namespace {

TEST(Prometheus, Names) {
  EXPECT_TRUE(IsMetricName("hpcml_train_loss"));
  EXPECT_TRUE(IsMetricName("a:b_c9"));
  EXPECT_FALSE(IsMetricName(""));
  EXPECT_FALSE(IsMetricName("9lives"));
  EXPECT_FALSE(IsMetricName("a-b"));
  EXPECT_TRUE(IsLabelName("job_id"));
  EXPECT_FALSE(IsLabelName("a:b"));
  EXPECT_FALSE(IsLabelName("__name__"));
}

TEST(Prometheus, EscapesLabelValues) {
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  // Not UTF-8: replaced, the rest kept.
  EXPECT_EQ(EscapeLabelValue("x\xff y"), "x\xEF\xBF\xBD y");
  EXPECT_EQ(EscapeLabelValue("Zürich"), "Zürich");
}

TEST(Prometheus, FormatsValues) {
  EXPECT_EQ(FormatMetricValue(3), "3");
  EXPECT_EQ(FormatMetricValue(0.1), "0.1");
  EXPECT_EQ(FormatMetricValue(12.345678), "12.345678");
  EXPECT_EQ(FormatMetricValue(std::nan("")), "NaN");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatMetricValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(std::stod(FormatMetricValue(1.0 / 3)), 1.0 / 3);
}

TEST(Prometheus, WritesFamilies) {
  MetricsText m;
  m.Family("hpcml_x_total", MetricType::kCounter, "Things, counted.\nSecond \"line\" \\");
  m.Sample({{"reason", "a\"b"}, {"zone", "ae"}}, 2);
  m.Sample({}, 1);
  m.Family("hpcml_y_seconds", MetricType::kGauge, "Y.");
  m.Sample({{"job_id", "7"}}, 0.5);
  EXPECT_EQ(m.text(),
            "# HELP hpcml_x_total Things, counted.\\nSecond \"line\" \\\\\n"
            "# TYPE hpcml_x_total counter\n"
            "hpcml_x_total{reason=\"a\\\"b\",zone=\"ae\"} 2\n"
            "hpcml_x_total 1\n"
            "# HELP hpcml_y_seconds Y.\n"
            "# TYPE hpcml_y_seconds gauge\n"
            "hpcml_y_seconds{job_id=\"7\"} 0.5\n");
}

TEST(Prometheus, RefusesBadFamiliesAndLabels) {
  MetricsText m;
  EXPECT_THROW(m.Sample({}, 1), std::invalid_argument);
  EXPECT_THROW(m.Family("bad-name", MetricType::kGauge, ""), std::invalid_argument);
  EXPECT_THROW(m.Family("hpcml_count", MetricType::kCounter, ""), std::invalid_argument);
  EXPECT_THROW(m.Family("hpcml_g_total", MetricType::kGauge, ""), std::invalid_argument);
  m.Family("hpcml_g", MetricType::kGauge, "");
  EXPECT_THROW(m.Family("hpcml_g", MetricType::kGauge, ""), std::invalid_argument);
  EXPECT_THROW(m.Sample({{"bad-label", "v"}}, 1), std::invalid_argument);
}

}  // namespace
}  // namespace hpcml
