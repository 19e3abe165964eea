#include "hpcml/guard/audit.hpp"
#include "hpcml/common/sha256.hpp"

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "hpcml/common/fs.hpp"
#include "hpcml/common/strings.hpp"

namespace hpcml::guard {
namespace {

namespace fs = std::filesystem;

AuditRecord Rec(int i) {
  AuditRecord r;
  r.context = "node";
  r.enforce = "mount";
  r.guard_version = "0.1.0";
  r.policy_sha256 = std::string(64, 'a');
  r.cluster = "c";
  r.node = "n1";
  r.job_id = std::to_string(100 + i);
  r.step_id = "0";
  r.uid = 1001;
  r.user = "alice";
  r.role = "ml-engineer";
  r.zone = "ae";
  r.datasets = {"/data/ae/x.h5"};
  r.allow = i % 2 == 0;
  r.reason = "reason " + std::to_string(i);
  return r;
}

std::string Problems(const VerifyReport& r) {
  std::string out;
  for (const auto& p : r.problems)
    out += p.file + ":" + std::to_string(p.line) + ": " + p.reason + "\n";
  return out;
}

class AuditTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("guard_audit_test." + std::to_string(::getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / "audit.jsonl").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::vector<std::string> Lines() {
    std::ifstream in(path_);
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }
  void WriteLines(const std::vector<std::string>& lines) {
    std::string text;
    for (const auto& l : lines) text += l + "\n";
    ASSERT_TRUE(WriteFileAtomic(path_, text).ok());
  }
  fs::path dir_;
  std::string path_;
};

TEST(Sha256, KnownVector) {
  EXPECT_EQ(Sha256::Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_F(AuditTest, LinesCarryEveryFieldAndChain) {
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(AppendAudit(path_, Rec(i), /*sync=*/i == 1).ok());
  auto lines = Lines();
  ASSERT_EQ(lines.size(), 3u);
  auto j0 = nlohmann::json::parse(lines[0]);
  auto j1 = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(j0["seq"], 0);
  EXPECT_EQ(j0["prev"], std::string(64, '0'));
  EXPECT_EQ(j1["seq"], 1);
  EXPECT_EQ(j1["prev"], Sha256::Hex(lines[0]));
  for (const char* key :
       {"time", "context", "enforce", "guard_version", "policy_sha256", "cluster", "node", "job_id",
        "step_id", "uid", "user", "role", "zone", "datasets", "decision", "reason"})
    EXPECT_TRUE(j1.contains(key)) << key;
  EXPECT_EQ(j1["guard_version"], "0.1.0");
  EXPECT_EQ(j1["policy_sha256"], std::string(64, 'a'));
  EXPECT_EQ(j0["decision"], "allow");
  EXPECT_EQ(j1["decision"], "deny");
  // "YYYY-MM-DDTHH:MM:SS.mmmZ", UTC, now.
  const std::string when = j1["time"].get<std::string>();
  struct tm tm {};
  int ms = -1;
  ASSERT_EQ(std::sscanf(when.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon,
                        &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms),
            7)
      << when;
  EXPECT_EQ(when.size(), 24u) << when;
  EXPECT_GE(ms, 0);
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  EXPECT_LE(std::llabs(static_cast<long long>(::timegm(&tm)) -
                       static_cast<long long>(std::time(nullptr))),
            5)
      << when;
  EXPECT_EQ(fs::status(path_).permissions() & fs::perms::others_all, fs::perms::none);
  auto rep = VerifyAuditLog(path_);
  ASSERT_TRUE(rep.ok());
  EXPECT_TRUE(rep->intact) << Problems(*rep);
  EXPECT_EQ(rep->lines, 3u);
  EXPECT_EQ(rep->head, Sha256::Hex(lines[2]));
}

TEST_F(AuditTest, DetectsAnEditedLine) {
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(AppendAudit(path_, Rec(i)).ok());
  auto lines = Lines();
  auto j = nlohmann::json::parse(lines[2]);
  j["decision"] = "allow";
  j["reason"] = "edited";
  lines[2] = j.dump();
  WriteLines(lines);
  auto rep = VerifyAuditLog(path_);
  ASSERT_TRUE(rep.ok());
  EXPECT_FALSE(rep->intact);
  ASSERT_EQ(rep->problems.size(), 1u);
  EXPECT_EQ(rep->problems[0].line, 3u);
  EXPECT_NE(rep->problems[0].reason.find(":4: it was edited"), std::string::npos)
      << rep->problems[0].reason;
}

TEST_F(AuditTest, DetectsARemovedLine) {
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(AppendAudit(path_, Rec(i)).ok());
  auto lines = Lines();
  lines.erase(lines.begin() + 1);
  WriteLines(lines);
  auto rep = VerifyAuditLog(path_);
  ASSERT_TRUE(rep.ok());
  EXPECT_FALSE(rep->intact);
  ASSERT_EQ(rep->problems.size(), 1u);
  EXPECT_EQ(rep->problems[0].line, 2u);
  EXPECT_NE(rep->problems[0].reason.find("removed"), std::string::npos);
}

TEST_F(AuditTest, DetectsReorderedLines) {
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(AppendAudit(path_, Rec(i)).ok());
  auto lines = Lines();
  std::swap(lines[3], lines[4]);
  WriteLines(lines);
  auto rep = VerifyAuditLog(path_);
  ASSERT_TRUE(rep.ok());
  EXPECT_FALSE(rep->intact);
  ASSERT_FALSE(rep->problems.empty());
  EXPECT_EQ(rep->problems[0].line, 4u);
}

TEST_F(AuditTest, DetectsGarbageAndTornLines) {
  EXPECT_EQ(VerifyAuditText("not json\n").problems.at(0).line, 1u);
  EXPECT_FALSE(VerifyAuditText("{\"seq\":0}\n").intact);
  ASSERT_TRUE(AppendAudit(path_, Rec(0)).ok());
  {
    std::ofstream out(path_, std::ios::app);
    out << "{\"seq\":1,\"tor";  // a crash mid-write
  }
  auto torn = VerifyAuditLog(path_);
  ASSERT_TRUE(torn.ok());
  EXPECT_EQ(torn->problems.at(0).line, 2u);
  // The next append starts on a fresh line; the torn one stays visible.
  ASSERT_TRUE(AppendAudit(path_, Rec(1)).ok());
  EXPECT_EQ(Lines().size(), 3u);
  auto after = VerifyAuditLog(path_);
  ASSERT_EQ(after->problems.size(), 1u);
  EXPECT_EQ(after->problems[0].line, 2u);
  EXPECT_TRUE(VerifyAuditText("").intact);
}

TEST_F(AuditTest, ReportsEveryBadLineAndGoesOn) {
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(AppendAudit(path_, Rec(i)).ok());
  auto lines = Lines();
  auto j = nlohmann::json::parse(lines[1]);
  j["reason"] = "edited";
  lines[1] = j.dump();
  lines.erase(lines.begin() + 5);
  WriteLines(lines);
  auto rep = VerifyAuditLog(path_);
  ASSERT_TRUE(rep.ok());
  ASSERT_EQ(rep->problems.size(), 2u) << Problems(*rep);
  EXPECT_EQ(rep->problems[0].line, 2u);
  EXPECT_NE(rep->problems[0].reason.find("edited"), std::string::npos);
  EXPECT_EQ(rep->problems[1].line, 6u);
  EXPECT_NE(rep->problems[1].reason.find("removed"), std::string::npos);
}

TEST_F(AuditTest, TheHeadFileShowsADroppedOrEditedTailAndADeletedLog) {
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(AppendAudit(path_, Rec(i)).ok());
  ASSERT_TRUE(VerifyAuditLog(path_)->intact);
  auto lines = Lines();
  WriteLines({lines.begin(), lines.end() - 2});  // the last two lines dropped
  auto dropped = VerifyAuditLog(path_);
  ASSERT_EQ(dropped->problems.size(), 1u) << Problems(*dropped);
  EXPECT_NE(dropped->problems[0].reason.find("ends at seq 2, but its head file records seq 4"),
            std::string::npos)
      << Problems(*dropped);
  auto j = nlohmann::json::parse(lines[4]);
  j["decision"] = "allow";
  lines[4] = j.dump();
  WriteLines(lines);  // all five, the last one edited
  auto edited = VerifyAuditLog(path_);
  ASSERT_EQ(edited->problems.size(), 1u) << Problems(*edited);
  EXPECT_EQ(edited->problems[0].line, 5u);
  EXPECT_NE(edited->problems[0].reason.find("the last line was edited"), std::string::npos);
  fs::remove(path_);
  auto deleted = VerifyAuditLog(path_);
  ASSERT_TRUE(deleted.ok()) << deleted.status().message();
  ASSERT_EQ(deleted->problems.size(), 1u);
  EXPECT_NE(deleted->problems[0].reason.find("deleted or emptied"), std::string::npos);
}

TEST_F(AuditTest, AWitnessOffTheNodeShowsARewrittenOrCutChain) {
  const std::string witness = (dir_ / "witness").string();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(AppendAudit(path_, Rec(i)).ok());
  ASSERT_TRUE(*AppendWitness(witness, "n1", path_ + ".head"));
  EXPECT_FALSE(*AppendWitness(witness, "n1", path_ + ".head")) << "unchanged: not again";
  ASSERT_TRUE(AppendAudit(path_, Rec(5)).ok());
  auto w = ReadWitness(witness, "n1");
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(w->size(), 1u);
  EXPECT_EQ((*w)[0].seq, 4u);
  EXPECT_TRUE(VerifyAuditFiles({path_}, *w)->intact);
  EXPECT_TRUE(ReadWitness(witness, "n2")->empty());

  // Root on the node rewrites the whole chain (log and head file): it
  // verifies on its own, not against the witness.
  fs::remove(path_);
  fs::remove(path_ + ".head");
  fs::remove(path_ + ".repeat");
  for (int i = 10; i < 16; ++i) ASSERT_TRUE(AppendAudit(path_, Rec(i)).ok());
  EXPECT_TRUE(VerifyAuditLog(path_)->intact) << "the bound: the node's files alone cannot tell";
  auto rewritten = VerifyAuditFiles({path_}, *w);
  ASSERT_TRUE(rewritten.ok());
  ASSERT_EQ(rewritten->problems.size(), 1u) << Problems(*rewritten);
  EXPECT_NE(rewritten->problems[0].reason.find("differs from the line the witness recorded"),
            std::string::npos);

  // Cut back below the witnessed head, head file and all.
  fs::remove(path_);
  fs::remove(path_ + ".head");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(AppendAudit(path_, Rec(i)).ok());
  auto cut = VerifyAuditFiles({path_}, *w);
  ASSERT_EQ(cut->problems.size(), 1u) << Problems(*cut);
  EXPECT_NE(cut->problems[0].reason.find("head seq 4 recorded by the witness"), std::string::npos);
}

// Issue 32, finding 1: with the collector's witness in hand, every way of
// losing the witnessed lines fails, and verify says how many it checked.
TEST_F(AuditTest, TheWitnessFailsAnEmptyARestartedAndACutLog) {
  const std::string witness = (dir_ / "witness").string();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(AppendAudit(path_, Rec(i)).ok());
  ASSERT_TRUE(*AppendWitness(witness, "n1", path_ + ".head"));
  auto w = *ReadWitness(witness, "n1");
  auto ok = VerifyAuditFiles({path_}, w);
  ASSERT_TRUE(ok->intact) << Problems(*ok);
  EXPECT_EQ(ok->witnessed, 1u);
  EXPECT_EQ(ok->witnessed_checked, 1u);
  const std::vector<std::string> original = Lines();

  // Emptied, its head file deleted.
  WriteLines({});
  fs::remove(path_ + ".head");
  auto empty = VerifyAuditFiles({path_}, w);
  ASSERT_FALSE(empty->intact);
  EXPECT_NE(Problems(*empty).find("the log is empty or missing, but the witness recorded its "
                                  "head at seq 4"),
            std::string::npos)
      << Problems(*empty);
  EXPECT_EQ(empty->witnessed_checked, 0u);

  // Rewritten from seq 1000 (a forged head file to continue from).
  fs::remove(path_);
  ASSERT_TRUE(WriteFileAtomic(path_ + ".head", "999 " + std::string(64, 'f') + "\n").ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(AppendAudit(path_, Rec(i)).ok());
  EXPECT_TRUE(VerifyAuditLog(path_)->intact) << "on its own it looks like a rotated log";
  auto restarted = VerifyAuditFiles({path_}, w);
  ASSERT_FALSE(restarted->intact);
  EXPECT_NE(Problems(*restarted).find("before this chain's first line (seq 1000)"),
            std::string::npos)
      << Problems(*restarted);

  // The first lines dropped, the witnessed one among them: only the
  // dropped lines, given as the rotated file they would be, reach back.
  fs::remove(path_);
  fs::remove(path_ + ".head");
  WriteLines(original);
  for (int i = 5; i < 8; ++i) ASSERT_TRUE(AppendAudit(path_, Rec(i)).ok());
  std::vector<std::string> all = Lines();
  const std::string older = (dir_ / "older.jsonl").string();
  {
    std::ofstream out(older);
    for (std::size_t i = 0; i < 5; ++i) out << all[i] << "\n";
  }
  WriteLines({all.begin() + 5, all.end()});
  auto cut = VerifyAuditFiles({path_}, w);
  ASSERT_FALSE(cut->intact);
  EXPECT_NE(Problems(*cut).find("the witness recorded the head at seq 4"), std::string::npos)
      << Problems(*cut);
  auto whole = VerifyAuditFiles({older, path_}, w);
  EXPECT_TRUE(whole->intact) << Problems(*whole);
  EXPECT_EQ(whole->witnessed_checked, 1u);
}

// Issue 32, finding 2: a deleted or emptied log is a gap the next line
// records, and verify reports it for ever; a rotation (a rename in the
// log's directory) is not.
TEST_F(AuditTest, ADeletedOrEmptiedLogIsAGapForEver) {
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(AppendAudit(path_, Rec(i)).ok());
  fs::remove(path_);
  ASSERT_TRUE(AppendAudit(path_, Rec(3)).ok());
  auto lines = Lines();
  ASSERT_EQ(lines.size(), 2u);
  auto gap = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(gap["context"], "gap");
  EXPECT_EQ(gap["seq"], 3);
  for (int i = 4; i < 8; ++i) ASSERT_TRUE(AppendAudit(path_, Rec(i)).ok());
  auto after = VerifyAuditLog(path_);
  ASSERT_FALSE(after->intact) << "healed by later lines";
  ASSERT_EQ(after->problems.size(), 1u) << Problems(*after);
  EXPECT_EQ(after->problems[0].line, 1u);
  EXPECT_NE(after->problems[0].reason.find("a gap in the trail: the log that ended at seq 2 is "
                                           "gone"),
            std::string::npos)
      << Problems(*after);

  // Emptied in place (truncated): the same.
  fs::remove(path_);
  fs::remove(path_ + ".head");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(AppendAudit(path_, Rec(i)).ok());
  fs::resize_file(path_, 0);
  ASSERT_TRUE(AppendAudit(path_, Rec(3)).ok());
  EXPECT_EQ(nlohmann::json::parse(Lines().front())["context"], "gap");

  // Rotated: no gap.
  fs::remove(path_);
  fs::remove(path_ + ".head");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(AppendAudit(path_, Rec(i)).ok());
  fs::rename(path_, path_ + ".1");
  ASSERT_TRUE(AppendAudit(path_, Rec(3)).ok());
  EXPECT_NE(nlohmann::json::parse(Lines().front())["context"], "gap");
  EXPECT_TRUE(VerifyAuditFiles({path_ + ".1", path_})->intact);

  // Deleted, and its inode number now another file's in the directory (a
  // side file made later got it, or root arranged it): still a gap.
  fs::remove(path_ + ".1");
  fs::remove(path_);
  const std::string other = (dir_ / "audit.jsonl.other").string();
  std::ofstream(other) << "not the log\n";
  struct stat st {};
  ASSERT_EQ(::stat(other.c_str(), &st), 0);
  std::string head = *ReadFile(path_ + ".head");
  head = head.substr(0, head.rfind(' ')) + " " + std::to_string(st.st_dev) + ":" +
         std::to_string(st.st_ino) + "\n";
  std::ofstream(path_ + ".head", std::ios::trunc) << head;
  ASSERT_TRUE(AppendAudit(path_, Rec(5)).ok());
  EXPECT_EQ(nlohmann::json::parse(Lines().front())["context"], "gap");
}

// Issue 32, finding 3: a denial costs about 1 KB whatever the user sends;
// an allow keeps its datasets (what was read).
TEST_F(AuditTest, ADenialStaysNearOneKilobyteWhateverTheUserSends) {
  AuditRecord big = Rec(1);  // a denial
  ASSERT_FALSE(big.allow);
  big.datasets.clear();
  for (int i = 0; i < 32; ++i)
    big.datasets.push_back("/data/ae/" + std::string(2000, static_cast<char>('a' + i % 26)));
  big.reason = "dataset '" + big.datasets[0] + "' is not in zone 'eu'";
  auto line = AppendAudit(path_, big);
  ASSERT_TRUE(line.ok()) << line.status().message();
  EXPECT_LE(line->size(), 1100u) << *line;
  auto j = nlohmann::json::parse(*line);
  std::string all;
  for (const auto& d : big.datasets) all += d + "\n";
  const std::string last = j["datasets"].back().get<std::string>();
  EXPECT_NE(last.find("sha256 of all 32: " + Sha256::Hex(all)), std::string::npos) << last;
  AuditRecord allowed = big;
  allowed.allow = true;
  allowed.reason = "ok";
  auto allow_line = AppendAudit(path_, allowed);
  ASSERT_TRUE(allow_line.ok());
  EXPECT_EQ(nlohmann::json::parse(*allow_line)["datasets"].size(), 32u) << "an allow keeps them";
  EXPECT_TRUE(VerifyAuditLog(path_)->intact);
}

// Issue 32, finding 3: a flood of varied denials (each naming other
// paths) of one user for one reason writes kAuditFloodLines lines a window,
// then one "flood" line with the count; other users and allows are not held.
TEST_F(AuditTest, AFloodOfVariedDenialsIsCountedPerUserAndReason) {
  auto denial = [](const std::string& user, int i) {
    AuditRecord r = Rec(1);
    r.user = user;
    r.uid = user == "bob" ? 1002 : 1003;
    r.datasets = {"/data/ae/x" + std::to_string(i) + ".h5"};
    r.reason = "dataset '/data/ae/x" + std::to_string(i) + ".h5' matches no entry";
    r.reason_code = "dataset_unknown";
    return r;
  };
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(AppendAudit(path_, denial("bob", i)).ok());
  EXPECT_EQ(Lines().size(), kAuditFloodLines);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(AppendAudit(path_, denial("carol", i)).ok());
  ASSERT_TRUE(AppendAudit(path_, Rec(0)).ok());  // an allow
  EXPECT_EQ(Lines().size(), kAuditFloodLines + 4);
  // The window passes (the run started long ago): the next line brings the count.
  std::string flood = *ReadFile(path_ + ".flood");
  std::string moved;
  for (std::string_view l : SplitFields(flood, '\n')) {
    if (l.empty()) continue;
    auto f = SplitFields(l, ' ');
    f[1] = "1000";
    for (std::size_t k = 0; k < f.size(); ++k)
      moved += std::string(f[k]) + (k + 1 < f.size() ? " " : "\n");
  }
  ASSERT_TRUE(WriteFileAtomic(path_ + ".flood", moved).ok());
  ASSERT_TRUE(AppendAudit(path_, Rec(2)).ok());
  auto lines = Lines();
  auto summary = nlohmann::json::parse(lines[lines.size() - 2]);
  EXPECT_EQ(summary["context"], "flood");
  EXPECT_EQ(summary["user"], "bob");
  EXPECT_EQ(summary["reason_code"], "dataset_unknown");
  EXPECT_EQ(summary["count"], 50 - kAuditFloodLines);
  EXPECT_TRUE(VerifyAuditLog(path_)->intact) << Problems(*VerifyAuditLog(path_));
}

TEST_F(AuditTest, RotationKeepsTheChain) {
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(AppendAudit(path_, Rec(i)).ok());
  std::string last_before = Lines().back();
  fs::rename(path_, path_ + ".1");  // logrotate: the log moves, a new one starts
  for (int i = 3; i < 5; ++i) ASSERT_TRUE(AppendAudit(path_, Rec(i)).ok());
  auto first_after = nlohmann::json::parse(Lines().front());
  EXPECT_EQ(first_after["seq"], 3);
  EXPECT_EQ(first_after["prev"], Sha256::Hex(last_before));
  auto both = VerifyAuditFiles({path_ + ".1", path_});
  ASSERT_TRUE(both.ok());
  EXPECT_TRUE(both->intact) << Problems(*both);
  EXPECT_EQ(both->lines, 5u);
  auto current = VerifyAuditLog(path_);  // the older file rotated away
  EXPECT_TRUE(current->intact) << Problems(*current);
  EXPECT_EQ(current->first_seq, 3u);
  // A rotated file that is gone from the middle is not.
  fs::rename(path_, path_ + ".2");
  ASSERT_TRUE(AppendAudit(path_, Rec(5)).ok());
  auto gap = VerifyAuditFiles({path_ + ".1", path_});
  EXPECT_FALSE(gap->intact);
}

TEST_F(AuditTest, RepeatedIdenticalDenialsAreSummarised) {
  AuditRecord deny = Rec(1);  // odd: a denial
  for (int i = 0; i < 50; ++i) {
    deny.job_id = std::to_string(500 + i);  // a new job each time, the same denial
    ASSERT_TRUE(AppendAudit(path_, deny).ok());
  }
  EXPECT_EQ(Lines().size(), 1u);
  ASSERT_TRUE(AppendAudit(path_, Rec(2)).ok());  // anything else flushes the count
  auto lines = Lines();
  ASSERT_EQ(lines.size(), 3u);
  auto summary = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(summary["context"], "repeat");
  EXPECT_EQ(summary["count"], 49);
  EXPECT_EQ(summary["of"], 0);
  EXPECT_EQ(summary["last"], "549.0");
  auto rep = VerifyAuditLog(path_);
  EXPECT_TRUE(rep->intact) << Problems(*rep);
  // A different denial is a line of its own.
  AuditRecord other = Rec(3);
  other.reason = "another reason";
  ASSERT_TRUE(AppendAudit(path_, Rec(1)).ok());
  ASSERT_TRUE(AppendAudit(path_, other).ok());
  EXPECT_EQ(Lines().size(), 5u);
}

// Each step's append costs only what it changes: allowed steps, the common
// case, write neither side file (two opens, writes and closes each).
TEST_F(AuditTest, AllowedStepsLeaveTheSideFilesAlone) {
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(AppendAudit(path_, Rec(2 * i)).ok());  // even: allows
  EXPECT_FALSE(fs::exists(path_ + ".repeat"));
  EXPECT_FALSE(fs::exists(path_ + ".flood"));
  ASSERT_TRUE(AppendAudit(path_, Rec(1)).ok());  // a denial starts a repeat run and a flood run
  EXPECT_FALSE(ReadFile(path_ + ".repeat")->empty());
  EXPECT_FALSE(ReadFile(path_ + ".flood")->empty());
  ASSERT_TRUE(AppendAudit(path_, Rec(2)).ok());  // an allow ends the repeat run
  EXPECT_TRUE(ReadFile(path_ + ".repeat")->empty());
  EXPECT_EQ(Lines().size(), 5u);
  auto rep = VerifyAuditLog(path_);
  EXPECT_TRUE(rep->intact) << Problems(*rep);
}

// Which guard and which policy decided are part of what makes two denials
// the same: a changed policy starts a line of its own.
TEST_F(AuditTest, ANewPolicyDigestIsNotARepeat) {
  AuditRecord deny = Rec(1);
  ASSERT_TRUE(AppendAudit(path_, deny).ok());
  ASSERT_TRUE(AppendAudit(path_, deny).ok());
  EXPECT_EQ(Lines().size(), 1u);
  deny.policy_sha256 = std::string(64, 'b');
  ASSERT_TRUE(AppendAudit(path_, deny).ok());
  auto lines = Lines();
  ASSERT_EQ(lines.size(), 3u);  // the first, the repeat summary, the new policy's line
  EXPECT_EQ(nlohmann::json::parse(lines[2])["policy_sha256"], std::string(64, 'b'));
}

// Lines written before the guard recorded its version and the policy digest
// (no "guard_version", no "policy_sha256") still verify, and the chain goes
// on from them.
TEST_F(AuditTest, OldLinesWithoutVersionAndDigestStillVerify) {
  const std::string old0 =
      R"({"seq":0,"time":"2026-11-22T03:08:56.793Z","context":"node","enforce":"mount",)"
      R"("cluster":"hpcml","node":"n1","job_id":"2","step_id":"0","uid":1001,"user":"alice",)"
      R"("role":"reader","zone":"ae","datasets":["/data/ae/x.h5"],"decision":"allow",)"
      R"("reason":"allowed","prev":")" +
      std::string(64, '0') + R"("})";
  {
    std::ofstream out(path_);
    out << old0 << "\n";
  }
  ASSERT_TRUE(AppendAudit(path_, Rec(2)).ok());
  auto lines = Lines();
  ASSERT_EQ(lines.size(), 2u);
  auto j1 = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(j1["seq"], 1);
  EXPECT_EQ(j1["prev"], Sha256::Hex(old0));
  EXPECT_EQ(j1["guard_version"], "0.1.0");
  auto rep = VerifyAuditLog(path_);
  ASSERT_TRUE(rep.ok());
  EXPECT_TRUE(rep->intact) << Problems(*rep);
  EXPECT_EQ(rep->lines, 2u);
}

TEST_F(AuditTest, LoggedValuesAreBounded) {
  AuditRecord r = Rec(1);
  r.reason = std::string(100000, 'x');
  for (int i = 0; i < 1000; ++i) r.datasets.push_back("/data/ae/" + std::string(200, 'd'));
  ASSERT_TRUE(AppendAudit(path_, r).ok());
  std::string line = Lines().at(0);
  EXPECT_LT(line.size(), 16u * 1024) << "a line of " << line.size() << " bytes";
  auto j = nlohmann::json::parse(line);
  EXPECT_NE(j["reason"].get<std::string>().find("[100000 bytes]"), std::string::npos);
  EXPECT_NE(j["datasets"].back().get<std::string>().find("more; sha256 of all 1001"),
            std::string::npos)
      << "a denial";
  r.allow = true;
  ASSERT_TRUE(AppendAudit(path_, r).ok());
  j = nlohmann::json::parse(Lines().at(1));
  EXPECT_LT(Lines().at(1).size(), 24u * 1024);
  EXPECT_EQ(j["datasets"].size(), kMaxAuditDatasets + 1) << "an allow";
}

TEST_F(AuditTest, AFullDiskFailsTheAppendAndKeepsEarlierLines) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // A 16 KiB file system of its own, in a mount namespace of its own.
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("t", dir_.c_str(), "tmpfs", 0, "size=16k") != 0)
      ::_exit(10);
    Status failed;
    int written = 0;
    for (; written < 1000; ++written) {
      auto st = AppendAudit(path_, Rec(2 * written));  // allows: never summarised
      if (!st.ok()) {
        failed = st.status();
        break;
      }
    }
    if (failed.ok() || failed.message().find("No space left") == std::string::npos) ::_exit(11);
    auto rep = VerifyAuditLog(path_);
    if (!rep.ok() || !rep->intact || rep->lines != static_cast<std::size_t>(written)) ::_exit(12);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "failed check " << WEXITSTATUS(status);
}

TEST_F(AuditTest, ConcurrentWritersNeverInterleave) {
  constexpr int kProcs = 4, kThreads = 2, kEach = 25;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::vector<std::thread> threads;
      bool ok = true;
      for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
          for (int i = 0; i < kEach; ++i) {
            AuditRecord r = Rec(i);
            // Allows: every one is written (denials past kAuditFloodLines a
            // user would be counted), each long, to provoke interleaving.
            r.allow = true;
            r.reason = std::string(3000, static_cast<char>('a' + (p * kThreads + t) % 26));
            if (!AppendAudit(path_, r).ok()) ok = false;
          }
        });
      for (auto& th : threads) th.join();
      ::_exit(ok ? 0 : 1);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  auto rep = VerifyAuditLog(path_);
  ASSERT_TRUE(rep.ok());
  EXPECT_TRUE(rep->intact) << Problems(*rep);
  EXPECT_EQ(rep->lines, static_cast<std::size_t>(kProcs * kThreads * kEach));
}

TEST_F(AuditTest, HostileStringsStayOneLine) {
  AuditRecord r = Rec(0);
  r.datasets = {"/data/a\nb", std::string("/data/\xff\xfe")};
  r.reason = "x\"}\n{\"seq\":99";
  ASSERT_TRUE(AppendAudit(path_, r).ok());
  EXPECT_EQ(Lines().size(), 1u);
  EXPECT_TRUE(VerifyAuditLog(path_)->intact);
}

TEST_F(AuditTest, MissingDirectoryIsAnError) {
  auto r = AppendAudit((dir_ / "nodir" / "audit.jsonl").string(), Rec(0));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nodir"), std::string::npos);
}

}  // namespace
}  // namespace hpcml::guard
