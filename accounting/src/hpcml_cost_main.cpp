// hpcml-cost: GPU cost reports over sacct, and usage records for the trainer.
//
//   hpcml-cost --prices P.toml [--start T] [--end T] [--account A] [--user U] [--partition P]
//              [--input FILE|-] [--usage-dir DIR] [--by LIST] [--format F] [--output FILE]
//              [--svg FILE] [--strict]
//   hpcml-cost record --dir DIR --gpu-seconds S [...]
//
// Exit status (common/exit_codes.hpp): 0 report written (malformed lines
// skipped are counted in it), 1 an error (message on stderr), 2 a usage
// error: an unknown option, --prices missing, a bad --start, --end, --now,
// --by or --format, record without a job id.
#include <fcntl.h>
#include <unistd.h>

#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <ctime>

#include <iostream>

#include "format.hpp"
#include "hpcml/accounting/usage_record.hpp"
#include "hpcml/common/exit_codes.hpp"
#include "hpcml/common/fs.hpp"
#include "hpcml/common/identity.hpp"
#include "hpcml/common/log.hpp"
#include "hpcml/common/process.hpp"
#include "hpcml/common/strings.hpp"
#include "hpcml/common/unique_fd.hpp"
#include "prices.hpp"
#include "report.hpp"
#include "sacct.hpp"

namespace ha = hpcml::accounting;

namespace {

hpcml::Logger g_log("hpcml-cost");

struct ReportArgs {
  std::string prices;
  std::string input;
  std::string start, end, now;
  std::string account, user, partition, jobs;
  std::string by = "account,user,partition,gpu_type";
  std::string format = "table";
  std::string output;
  std::string svg;
  std::vector<std::string> usage_dirs;
  std::string sacct = "sacct";
  bool strict = false;
};

struct RecordArgs {
  std::string dir;
  ha::UsageRecord r;
  double gpu_util = -1, gpu_energy = -1;
  bool no_comment = false;
  std::string scontrol = "scontrol";
};

// Logs `st` and returns `code`.
int Fail(const hpcml::Status& st, int code = hpcml::kExitError) {
  g_log.error("{}", st.message());
  g_log.debug("{}", st.Debug());
  return code;
}

hpcml::Status ParseTimeOption(const std::string& name, const std::string& text, int64_t* out) {
  if (text.empty()) return hpcml::Status::Ok();
  if (text == "now") {
    *out = time(nullptr);
    return hpcml::Status::Ok();
  }
  hpcml::Result<int64_t> t = ha::ParseSlurmTime(text);
  if (!t.ok() || *t == ha::kNoTime) {
    return hpcml::InvalidArgument("--{} '{}': expected YYYY-MM-DD[THH:MM[:SS]] or now", name, text);
  }
  *out = *t;
  return hpcml::Status::Ok();
}

std::vector<std::string> SacctArgv(const ReportArgs& a) {
  std::vector<std::string> argv = {
      a.sacct, "-P", "-D", "-X", "--noconvert", "-o", std::string(ha::kSacctFields)};
  if (!a.start.empty()) argv.insert(argv.end(), {"-S", a.start});
  if (!a.end.empty()) argv.insert(argv.end(), {"-E", a.end});
  if (!a.account.empty()) argv.insert(argv.end(), {"-A", a.account});
  if (!a.user.empty()) {
    argv.insert(argv.end(), {"-u", a.user});
  } else {
    argv.push_back("-a");  // every user's jobs, not only the caller's
  }
  if (!a.partition.empty()) argv.insert(argv.end(), {"-r", a.partition});
  if (!a.jobs.empty()) argv.insert(argv.end(), {"-j", a.jobs});
  return argv;
}

// The report's options from the command line: period, groupings, filters.
hpcml::Result<ha::ReportOptions> ReportOptionsOf(const ReportArgs& a, ha::Format format) {
  ha::ReportOptions opt;
  opt.now = time(nullptr);
  HPCML_RETURN_IF_ERROR(ParseTimeOption("start", a.start, &opt.period_start));
  HPCML_RETURN_IF_ERROR(ParseTimeOption("end", a.end, &opt.period_end));
  HPCML_RETURN_IF_ERROR(ParseTimeOption("now", a.now, &opt.now));
  if (opt.period_start != ha::kNoTime && opt.period_end != ha::kNoTime &&
      opt.period_end <= opt.period_start) {
    return hpcml::InvalidArgument("--end {} is not after --start {}", a.end, a.start);
  }
  opt.groups.clear();
  for (const std::string& name : hpcml::SplitList(a.by)) {
    hpcml::Result<ha::GroupBy> g = ha::ParseGroupBy(name);
    if (!g.ok()) return std::move(g).status().WithContext("--by");
    opt.groups.push_back(*g);
  }
  opt.accounts = a.account;
  opt.users = a.user;
  opt.partitions = a.partition;
  opt.jobs = a.jobs;
  opt.chart = format == ha::Format::kSvg || !a.svg.empty();
  opt.cross = format == ha::Format::kPrometheus;
  return opt;
}

// Streams the sacct rows into `agg`: from --input (a file or stdin), or from
// a run of sacct, whose exit status counts too.
hpcml::Status ReadSacct(const ReportArgs& a, ha::CostAggregator& agg) {
  if (!a.input.empty()) {
    hpcml::UniqueFd owned;
    int fd = 0;
    std::string source = "stdin";
    if (a.input != "-") {
      HPCML_ASSIGN_OR_RETURN(owned, hpcml::OpenFd(a.input, O_RDONLY));
      fd = owned.get();
      source = a.input;
    }
    ha::SacctReader reader(fd, source);
    return ha::StreamSacct(reader, agg, a.strict);
  }
  std::vector<std::string> argv = SacctArgv(a);
  g_log.debug("running: {}", fmt::join(argv, " "));
  HPCML_ASSIGN_OR_RETURN(hpcml::ChildProcess child, hpcml::ChildProcess::Spawn(argv));
  ha::SacctReader reader(child.stdout_fd(), "sacct");
  hpcml::Status st = ha::StreamSacct(reader, agg, a.strict);
  hpcml::Status wait = child.Wait();
  if (st.ok() && !wait.ok()) st = wait;
  return st;
}

// The report to --output (or stdout) and the chart to --svg.
hpcml::Status WriteReport(const ReportArgs& a, const ha::Report& report, ha::Format format) {
  std::string text = ha::Render(report, format);
  if (a.output.empty() || a.output == "-") {
    std::cout << text << std::flush;
    if (!std::cout) return hpcml::IoError("writing the report to stdout failed");
  } else {
    HPCML_RETURN_IF_ERROR(hpcml::WriteFileAtomic(a.output, text));
  }
  if (!a.svg.empty()) HPCML_RETURN_IF_ERROR(hpcml::WriteFileAtomic(a.svg, ha::FormatSvg(report)));
  return hpcml::Status::Ok();
}

hpcml::Status RunReport(const ReportArgs& a, ha::Format format, const ha::ReportOptions& opt) {
  HPCML_ASSIGN_OR_RETURN(ha::PriceTable prices, ha::PriceTable::Load(a.prices));
  ha::CostAggregator agg(prices, opt);
  for (const std::string& dir : a.usage_dirs) {
    hpcml::Result<std::vector<ha::UsageRecord>> recs = ha::ReadUsageRecordDir(dir);
    if (!recs.ok()) return std::move(recs).status().WithContext("--usage-dir");
    agg.AddUsageRecords(std::move(recs).value());
  }
  HPCML_RETURN_IF_ERROR(ReadSacct(a, agg));
  const ha::Report& report = agg.report();
  if (report.input.malformed > 0) {
    g_log.warn("{}: skipped {} malformed lines (first: {}); --strict makes this an error",
               report.input.source, report.input.malformed, report.input.first_errors.front());
  }
  HPCML_RETURN_IF_ERROR(WriteReport(a, report, format));
  std::string detail;
  if (!report.Reconcile(&detail)) {
    return hpcml::Internal("the report does not reconcile: {}", detail);
  }
  return hpcml::Status::Ok();
}

int RunRecord(RecordArgs a) {
  if (a.r.job_id.empty()) {
    const char* id = getenv("SLURM_JOB_ID");
    if (!id) {
      return Fail(hpcml::InvalidArgument("record: no --job-id and SLURM_JOB_ID is not set"),
                  hpcml::kExitUsage);
    }
    a.r.job_id = id;
  }
  if (a.gpu_util >= 0) a.r.gpu_utilization_pct = a.gpu_util;
  if (a.gpu_energy >= 0) a.r.gpu_energy_joules = a.gpu_energy;
  if (a.r.written_at == 0) a.r.written_at = time(nullptr);
  ha::PublishOptions opt;
  opt.update_comment = !a.no_comment;
  opt.scontrol = a.scontrol;
  hpcml::Result<std::string> path = ha::PublishUsageRecord(a.dir, a.r, opt);
  if (!path.ok()) return Fail(path.status());
  std::cout << *path << "\n";
  return hpcml::kExitOk;
}

void AddReportOptions(CLI::App& app, ReportArgs& ra) {
  app.add_option("--prices", ra.prices, "Price table (TOML); default $HPCML_PRICES")
      ->envname("HPCML_PRICES");
  app.add_option("--input,-i", ra.input,
                 "Read `sacct -P` output from FILE ('-' = stdin) instead of running sacct");
  app.add_option("--start,-S", ra.start,
                 "Period start (YYYY-MM-DD[THH:MM[:SS]]): passed to sacct; "
                 "attempts are clipped to it");
  app.add_option("--end,-E", ra.end, "Period end (exclusive), as --start, or 'now'");
  app.add_option("--account,-A", ra.account, "Only these accounts (comma-separated)");
  app.add_option("--user,-u", ra.user, "Only these users (comma-separated)");
  app.add_option("--partition,-r", ra.partition, "Only these partitions (comma-separated)");
  app.add_option("--jobs,-j", ra.jobs, "Only these job ids (comma-separated)");
  app.add_option("--by", ra.by, "Groupings: job,user,account,partition,gpu_type")
      ->capture_default_str();
  app.add_option(
         "--format,-f", ra.format,
         "table, csv, json, svg or prometheus (the text format node_exporter's textfile collector "
         "reads; docs/monitoring.md)")
      ->capture_default_str();
  app.add_option("--output,-o", ra.output,
                 "Write the report to FILE (atomically) instead of stdout");
  app.add_option("--svg", ra.svg, "Also write the cost-by-account chart to FILE");
  app.add_option("--usage-dir", ra.usage_dirs,
                 "Directory of usage-*.json records (repeatable); Comments are read too");
  app.add_flag("--strict", ra.strict,
               "A malformed sacct line is an error (default: skip and count)");
  app.add_option("--sacct", ra.sacct, "sacct program to run")->capture_default_str();
  app.add_option("--now", ra.now, "End time of still-running attempts (default: now)");
}

CLI::App* AddRecordCommand(CLI::App& app, RecordArgs& rec) {
  CLI::App* record = app.add_subcommand(
      "record", "Write a usage record (JSON, atomically) and put its summary in the job's Comment");
  record->add_option("--dir", rec.dir, "Directory for usage-<job>-r<restart>.json")->required();
  record->add_option("--job-id", rec.r.job_id, "Job id (default $SLURM_JOB_ID)");
  record->add_option("--restart", rec.r.restart_count, "Restart count")
      ->envname("SLURM_RESTART_COUNT");
  record->add_option("--start-time", rec.r.start_time, "Attempt start, seconds since the epoch");
  record->add_option("--written-at", rec.r.written_at, "Record time (default now)");
  record->add_option("--gpu-type", rec.r.gpu_type, "GPU type, e.g. h100");
  record->add_option("--gpu-count", rec.r.gpu_count, "GPUs held");
  record->add_option("--gpu-seconds", rec.r.gpu_seconds, "GPU-seconds held")->required();
  record->add_option("--steps", rec.r.steps_done, "Steps run in this attempt");
  record->add_option("--samples", rec.r.samples_done, "Samples processed");
  record->add_option("--steps-lost", rec.r.steps_lost_to_preemption,
                     "Steps after the last checkpoint, to be redone");
  record->add_option("--checkpoint-seconds", rec.r.checkpoint_seconds, "Time spent checkpointing");
  record->add_option("--gpu-util", rec.gpu_util,
                     "Measured mean GPU utilisation % (omit if not measured)");
  record->add_option("--gpu-energy", rec.gpu_energy,
                     "Measured GPU energy in J (omit if not measured)");
  record->add_flag("--no-comment", rec.no_comment, "Do not run scontrol update Comment=...");
  record->add_option("--scontrol", rec.scontrol, "scontrol program to run")->capture_default_str();
  return record;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "hpcml-cost: GPU cost reports over sacct (per job, user, account, partition, GPU "
      "type), and usage records for training jobs",
      "hpcml-cost"};
  app.set_version_flag("--version", hpcml::VersionLine("hpcml-cost"));
  ReportArgs ra;
  AddReportOptions(app, ra);
  RecordArgs rec;
  CLI::App* record = AddRecordCommand(app, rec);
  // Set after the subcommand, which would copy it into its own --help.
  app.footer(hpcml::ExitStatusHelp());
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help is 0; CLI11's own codes are usage errors.
    return app.exit(e) == 0 ? hpcml::kExitOk : hpcml::kExitUsage;
  }
  if (*record) return RunRecord(rec);
  // The options alone, before any file is read: usage errors.
  if (ra.prices.empty()) {
    return Fail(hpcml::InvalidArgument("--prices is required (or set HPCML_PRICES); see "
                                       "examples/accounting/prices.toml"),
                hpcml::kExitUsage);
  }
  hpcml::Result<ha::Format> format = ha::ParseFormat(ra.format);
  if (!format.ok())
    return Fail(std::move(format).status().WithContext("--format"), hpcml::kExitUsage);
  hpcml::Result<ha::ReportOptions> opt = ReportOptionsOf(ra, *format);
  if (!opt.ok()) return Fail(opt.status(), hpcml::kExitUsage);
  if (hpcml::Status st = RunReport(ra, *format, *opt); !st.ok()) return Fail(st);
  return hpcml::kExitOk;
}
