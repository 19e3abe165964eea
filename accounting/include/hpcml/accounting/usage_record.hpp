// The usage record: what one attempt of a training job did with its GPUs.
//
// The trainer writes one per attempt (job id + restart count) as JSON beside
// its checkpoints, and a short summary of it into the job's Comment, which
// slurmdbd keeps per attempt (AccountingStoreFlags=job_comment) so that
// `sacct -D -o Comment` returns it. hpcml-cost reads either to price idle
// GPUs and work lost to preemption.
//
// Measured-only fields (GPU utilisation, energy) are std::optional: absent
// when not measured (no NVML), never filled with a guess; JSON and the
// Comment then omit them.
//
// Typical use by a trainer, at the end of an attempt or on SIGTERM:
//   UsageRecord r;
//   r.job_id = getenv("SLURM_JOB_ID"); r.restart_count = atoi(getenv("SLURM_RESTART_COUNT"));
//   r.gpu_type = "h100"; r.gpu_count = 4; r.gpu_seconds = 4 * wall; r.steps_done = ...;
//   r.written_at = time(nullptr);
//   Status st = PublishUsageRecord(checkpoint_dir, r, {});  // JSON + scontrol update Comment
//
// All functions are thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpcml/common/status.hpp"

namespace hpcml::accounting {

// Slurm refuses a job Comment longer than this (job_mgr.c, ESLURM_PATHNAME_TOO_LONG).
inline constexpr size_t kSlurmCommentMaxLen = 1024;
// The summary begins with this tag; hpcml-cost ignores Comments without it.
inline constexpr std::string_view kCommentTag = "hpcml/1";

struct UsageRecord {
  std::string job_id;      // SLURM_JOB_ID (array jobs: "123_4")
  int restart_count = 0;   // SLURM_RESTART_COUNT: 0 for the first attempt
  int64_t start_time = 0;  // when the attempt started (seconds since the epoch; 0 unknown)
  int64_t written_at = 0;  // when this record was written (seconds since the epoch)
  std::string gpu_type;    // "" for CPU-only attempts
  int gpu_count = 0;
  double gpu_seconds = 0;  // GPU-seconds the trainer held: gpu_count x its wall time
  int64_t steps_done = 0;  // optimizer steps run in this attempt, lost ones included
  int64_t samples_done = 0;
  int64_t steps_lost_to_preemption = 0;  // steps after the last checkpoint, redone next attempt
  double checkpoint_seconds = 0;         // wall time spent writing checkpoints
  std::optional<double> gpu_utilization_pct;  // mean over GPUs and time, 0..100; measured only
  std::optional<double> gpu_energy_joules;    // summed over GPUs; measured only
};

// Checks ranges and characters (job id [0-9A-Za-z_+.-], GPU type
// [0-9A-Za-z_.-], no negative counts, utilisation within 0..100, lost steps
// not above steps done).
Status ValidateUsageRecord(const UsageRecord& r);

// JSON text (one object, keys as the struct fields, plus "format": "hpcml-usage/1").
std::string UsageRecordToJson(const UsageRecord& r);
// Strict: unknown keys, wrong types and invalid values are errors naming `source`.
Result<UsageRecord> UsageRecordFromJson(std::string_view text, std::string_view source);

// "usage-<job_id>-r<restart_count>.json".
std::string UsageRecordFileName(const UsageRecord& r);

// Writes <dir>/<UsageRecordFileName> atomically (temp file, fsync, rename).
// Returns the path written.
Result<std::string> WriteUsageRecord(const std::string& dir, const UsageRecord& r);
Result<UsageRecord> ReadUsageRecord(const std::string& path);
// Every usage-*.json directly in `dir`, sorted by file name. A file that does
// not parse is an error naming it.
Result<std::vector<UsageRecord>> ReadUsageRecordDir(const std::string& dir);

// The Comment summary: "hpcml/1,j=123,a=1,t=1790000000,gt=h100,gn=2,gs=7200,st=1200,
// sm=38400,sl=50,ck=12.5[,gu=87.5][,ge=3600000]". No spaces, '|' or newlines,
// so it survives `sacct -P`. Error if longer than `max_len`.
Result<std::string> CommentSummary(const UsageRecord& r, size_t max_len = kSlurmCommentMaxLen);
// Parses a summary. NotFound if `comment` is not one (another tool's text);
// InvalidArgument if it has the tag but is damaged.
Result<UsageRecord> ParseCommentSummary(std::string_view comment);

struct PublishOptions {
  bool update_comment = true;         // run scontrol update JobId=<id> Comment=<summary>
  std::string scontrol = "scontrol";  // program to run (PATH lookup)
};

// `scontrol update JobId=<job_id> Comment=<comment>`; the error carries
// scontrol's exit status and message.
Status UpdateJobComment(const std::string& job_id, const std::string& comment,
                        const std::string& scontrol = "scontrol");

// WriteUsageRecord, then (if asked) UpdateJobComment with CommentSummary.
// The JSON is written first: a failing scontrol still leaves the record.
Result<std::string> PublishUsageRecord(const std::string& dir, const UsageRecord& r,
                                       const PublishOptions& options);

}  // namespace hpcml::accounting
