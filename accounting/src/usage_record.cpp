#include "hpcml/accounting/usage_record.hpp"

#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "hpcml/common/fs.hpp"
#include "hpcml/common/json.hpp"
#include "hpcml/common/process.hpp"
#include "hpcml/common/strings.hpp"
#include "hpcml/common/unique_fd.hpp"
#include "numbers.hpp"

namespace hpcml::accounting {

namespace {

constexpr std::string_view kFormat = "hpcml-usage/1";

bool CharsIn(std::string_view s, std::string_view extra) {
  return std::all_of(s.begin(), s.end(), [extra](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           extra.find(c) != std::string_view::npos;
  });
}

// Shortest text that reads back to the same double ("12.5", "7200").
std::string Num(double v) {
  return fmt::format("{}", v);
}

}  // namespace

Status ValidateUsageRecord(const UsageRecord& r) {
  if (r.job_id.empty() || r.job_id.size() > 64 || !CharsIn(r.job_id, "_+.-")) {
    return InvalidArgument("usage record: job id '{}' is not a Slurm job id", r.job_id);
  }
  if (r.gpu_type.size() > 64 || !CharsIn(r.gpu_type, "_.-")) {
    return InvalidArgument("usage record: GPU type '{}' has characters other than [0-9A-Za-z_.-]",
                           r.gpu_type);
  }
  if (r.restart_count < 0 || r.gpu_count < 0 || r.steps_done < 0 || r.samples_done < 0 ||
      r.steps_lost_to_preemption < 0 || r.start_time < 0 || r.written_at < 0) {
    return InvalidArgument("usage record for job {}: a count or time is negative", r.job_id);
  }
  if (!std::isfinite(r.gpu_seconds) || r.gpu_seconds < 0 || !std::isfinite(r.checkpoint_seconds) ||
      r.checkpoint_seconds < 0) {
    return InvalidArgument(
        "usage record for job {}: gpu_seconds and checkpoint_seconds must be "
        "finite and non-negative",
        r.job_id);
  }
  if (r.steps_lost_to_preemption > r.steps_done) {
    return InvalidArgument("usage record for job {}: {} steps lost but only {} done", r.job_id,
                           r.steps_lost_to_preemption, r.steps_done);
  }
  if (r.gpu_utilization_pct && (!std::isfinite(*r.gpu_utilization_pct) ||
                                *r.gpu_utilization_pct < 0 || *r.gpu_utilization_pct > 100)) {
    return InvalidArgument("usage record for job {}: GPU utilisation {} is outside 0..100",
                           r.job_id, *r.gpu_utilization_pct);
  }
  if (r.gpu_energy_joules && (!std::isfinite(*r.gpu_energy_joules) || *r.gpu_energy_joules < 0)) {
    return InvalidArgument("usage record for job {}: energy must be non-negative", r.job_id);
  }
  return Status::Ok();
}

std::string UsageRecordToJson(const UsageRecord& r) {
  nlohmann::ordered_json j;
  j["format"] = kFormat;
  j["job_id"] = r.job_id;
  j["restart_count"] = r.restart_count;
  j["start_time"] = r.start_time;
  j["written_at"] = r.written_at;
  j["gpu_type"] = r.gpu_type;
  j["gpu_count"] = r.gpu_count;
  j["gpu_seconds"] = r.gpu_seconds;
  j["steps_done"] = r.steps_done;
  j["samples_done"] = r.samples_done;
  j["steps_lost_to_preemption"] = r.steps_lost_to_preemption;
  j["checkpoint_seconds"] = r.checkpoint_seconds;
  if (r.gpu_utilization_pct) j["gpu_utilization_pct"] = *r.gpu_utilization_pct;
  if (r.gpu_energy_joules) j["gpu_energy_joules"] = *r.gpu_energy_joules;
  return JsonText(j, 2) + "\n";
}

Result<UsageRecord> UsageRecordFromJson(std::string_view text, std::string_view source) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Corrupt("{}: not valid JSON", source);
  if (!j.is_object()) return Corrupt("{}: not a JSON object", source);
  UsageRecord r;
  bool have_format = false, have_job = false;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const nlohmann::json& v = it.value();
    auto bad = [&](std::string_view want) {
      return Corrupt("{}: key '{}' must be {}", source, k, want);
    };
    if (k == "format") {
      if (!v.is_string() || v.get<std::string>() != kFormat) return bad("\"hpcml-usage/1\"");
      have_format = true;
    } else if (k == "job_id" || k == "gpu_type") {
      if (!v.is_string()) return bad("a string");
      (k == "job_id" ? r.job_id : r.gpu_type) = v.get<std::string>();
      have_job = have_job || k == "job_id";
    } else if (k == "restart_count" || k == "gpu_count") {
      if (!v.is_number_integer()) return bad("an integer");
      (k == "restart_count" ? r.restart_count : r.gpu_count) = v.get<int>();
    } else if (k == "start_time" || k == "written_at" || k == "steps_done" || k == "samples_done" ||
               k == "steps_lost_to_preemption") {
      if (!v.is_number_integer()) return bad("an integer");
      int64_t x = v.get<int64_t>();
      if (k == "start_time")
        r.start_time = x;
      else if (k == "written_at")
        r.written_at = x;
      else if (k == "steps_done")
        r.steps_done = x;
      else if (k == "samples_done")
        r.samples_done = x;
      else
        r.steps_lost_to_preemption = x;
    } else if (k == "gpu_seconds" || k == "checkpoint_seconds" || k == "gpu_utilization_pct" ||
               k == "gpu_energy_joules") {
      if (!v.is_number()) return bad("a number");
      double x = v.get<double>();
      if (k == "gpu_seconds")
        r.gpu_seconds = x;
      else if (k == "checkpoint_seconds")
        r.checkpoint_seconds = x;
      else if (k == "gpu_utilization_pct")
        r.gpu_utilization_pct = x;
      else
        r.gpu_energy_joules = x;
    } else {
      return Corrupt("{}: unknown key '{}'", source, k);
    }
  }
  if (!have_format) return Corrupt("{}: missing \"format\": \"{}\"", source, kFormat);
  if (!have_job) return Corrupt("{}: missing key 'job_id'", source);
  Status st = ValidateUsageRecord(r);
  if (!st.ok()) return Corrupt("{}: {}", source, st.message());
  return r;
}

std::string UsageRecordFileName(const UsageRecord& r) {
  return fmt::format("usage-{}-r{}.json", r.job_id, r.restart_count);
}

Result<std::string> WriteUsageRecord(const std::string& dir, const UsageRecord& r) {
  HPCML_RETURN_IF_ERROR(ValidateUsageRecord(r));
  std::string path = dir + "/" + UsageRecordFileName(r);
  HPCML_RETURN_IF_ERROR(WriteFileAtomic(path, UsageRecordToJson(r)));
  return path;
}

Result<UsageRecord> ReadUsageRecord(const std::string& path) {
  HPCML_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return UsageRecordFromJson(text, path);
}

Result<std::vector<UsageRecord>> ReadUsageRecordDir(const std::string& dir) {
  UniqueDir d(::opendir(dir.c_str()));
  if (!d) return ErrnoError(dir, errno);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d.get())) {
    std::string_view n = e->d_name;
    if (n.starts_with("usage-") && n.ends_with(".json")) names.emplace_back(n);
  }
  d.reset();
  std::sort(names.begin(), names.end());
  std::vector<UsageRecord> out;
  for (const std::string& n : names) {
    HPCML_ASSIGN_OR_RETURN(UsageRecord r, ReadUsageRecord(dir + "/" + n));
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::string> CommentSummary(const UsageRecord& r, size_t max_len) {
  HPCML_RETURN_IF_ERROR(ValidateUsageRecord(r));
  std::string s = fmt::format("{},j={},a={},t={},gt={},gn={},gs={},st={},sm={},sl={},ck={}",
                              kCommentTag, r.job_id, r.restart_count, r.written_at, r.gpu_type,
                              r.gpu_count, Num(r.gpu_seconds), r.steps_done, r.samples_done,
                              r.steps_lost_to_preemption, Num(r.checkpoint_seconds));
  if (r.start_time) s += fmt::format(",s={}", r.start_time);
  if (r.gpu_utilization_pct) s += ",gu=" + Num(*r.gpu_utilization_pct);
  if (r.gpu_energy_joules) s += ",ge=" + Num(*r.gpu_energy_joules);
  if (s.size() > max_len) {
    return InvalidArgument("usage summary for job {} is {} characters, over the limit of {}",
                           r.job_id, s.size(), max_len);
  }
  return s;
}

Result<UsageRecord> ParseCommentSummary(std::string_view comment) {
  if (!comment.starts_with(kCommentTag) ||
      (comment.size() > kCommentTag.size() && comment[kCommentTag.size()] != ',')) {
    return NotFound("not an hpcml usage summary");
  }
  UsageRecord r;
  const std::string_view rest = comment.substr(kCommentTag.size());
  bool have_job = false;
  // Every item after the tag's ',', an empty one included (it is an error).
  const std::vector<std::string_view> items =
      rest.empty() ? std::vector<std::string_view>() : SplitFields(rest.substr(1), ',');
  for (std::string_view item : items) {
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgument("usage summary item '{}' is not key=value", item);
    }
    std::string_view k = item.substr(0, eq), v = item.substr(eq + 1);
    int64_t i = 0;
    double d = 0;
    bool ok = true;
    if (k == "j") {
      r.job_id = v;
      have_job = true;
    } else if (k == "gt") {
      r.gpu_type = v;
    } else if (k == "a" || k == "gn") {
      ok = ParseWholeInt(v, &i) && i >= 0 && i <= INT32_MAX;
      (k == "a" ? r.restart_count : r.gpu_count) = static_cast<int>(i);
    } else if (k == "t" || k == "s" || k == "st" || k == "sm" || k == "sl") {
      ok = ParseWholeInt(v, &i);
      if (k == "t")
        r.written_at = i;
      else if (k == "s")
        r.start_time = i;
      else if (k == "st")
        r.steps_done = i;
      else if (k == "sm")
        r.samples_done = i;
      else
        r.steps_lost_to_preemption = i;
    } else if (k == "gs" || k == "ck" || k == "gu" || k == "ge") {
      ok = ParseFiniteDouble(v, &d);
      if (k == "gs")
        r.gpu_seconds = d;
      else if (k == "ck")
        r.checkpoint_seconds = d;
      else if (k == "gu")
        r.gpu_utilization_pct = d;
      else
        r.gpu_energy_joules = d;
    }  // unknown keys: written by a newer minor version; ignored
    if (!ok) return InvalidArgument("usage summary item '{}': bad number", item);
  }
  if (!have_job) return InvalidArgument("usage summary has no job id (j=)");
  HPCML_RETURN_IF_ERROR(ValidateUsageRecord(r));
  return r;
}

Status UpdateJobComment(const std::string& job_id, const std::string& comment,
                        const std::string& scontrol) {
  if (comment.size() > kSlurmCommentMaxLen) {
    return InvalidArgument("job {}: Comment of {} characters is over Slurm's limit of {}", job_id,
                           comment.size(), kSlurmCommentMaxLen);
  }
  Result<std::string> out =
      RunAndCapture({scontrol, "update", "JobId=" + job_id, "Comment=" + comment});
  if (!out.ok()) return std::move(out).status().WithContext("job " + job_id + ": scontrol update");
  return Status::Ok();
}

Result<std::string> PublishUsageRecord(const std::string& dir, const UsageRecord& r,
                                       const PublishOptions& options) {
  HPCML_ASSIGN_OR_RETURN(std::string summary, CommentSummary(r));
  HPCML_ASSIGN_OR_RETURN(std::string path, WriteUsageRecord(dir, r));
  if (options.update_comment) {
    HPCML_RETURN_IF_ERROR(UpdateJobComment(r.job_id, summary, options.scontrol));
  }
  return path;
}

}  // namespace hpcml::accounting
