#include "hpcml/featurecache/csv.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "test_util.hpp"

namespace hpcml::featurecache {
namespace {

using testing::TempDir;
using testing::WriteText;

std::vector<std::vector<std::string>> ReadAll(const std::string& path,
                                              std::vector<uint64_t>* lines = nullptr) {
  auto r = CsvReader::Open(path);
  EXPECT_TRUE(r.ok());
  std::vector<std::vector<std::string>> out;
  for (;;) {
    auto more = r->Next();
    EXPECT_TRUE(more.ok()) << more.status().ToString();
    if (!more.ok() || !*more) break;
    out.emplace_back(r->fields().begin(), r->fields().end());
    if (lines) lines->push_back(r->line());
  }
  return out;
}

TEST(Csv, PlainQuotedCrlfBlankAndBom) {
  TempDir dir;
  WriteText(dir / "a.csv",
            "\xEF\xBB\xBF"
            "a,b,c\r\n1,\"x,y\",\"he said \"\"hi\"\"\"\r\n\r\n2,,\"multi\nline\"\n3,4,5");
  std::vector<uint64_t> lines;
  auto rows = ReadAll(dir / "a.csv", &lines);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(rows[1], (std::vector<std::string>{"1", "x,y", "he said \"hi\""}));
  EXPECT_EQ(rows[2], (std::vector<std::string>{"2", "", "multi\nline"}));
  EXPECT_EQ(rows[3], (std::vector<std::string>{"3", "4", "5"}));
  EXPECT_EQ(lines, (std::vector<uint64_t>{1, 2, 4, 6}));
}

TEST(Csv, InvalidUtf8IsRefusedNamingFileLineAndColumn) {
  TempDir dir;
  // A Latin-1 header (a common spreadsheet export): "caf\xE9".
  WriteText(dir / "latin1.csv", "id,caf\xE9\n1,2\n");
  auto r = CsvReader::Open(dir / "latin1.csv");
  ASSERT_TRUE(r.ok());
  auto more = r->Next();
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.status().code(), StatusCode::kInvalidArgument);
  const std::string msg = more.status().message();
  EXPECT_NE(msg.find((dir / "latin1.csv") + ": line 1, column 2: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("not valid UTF-8"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0xE9"), std::string::npos) << msg;
  EXPECT_NE(msg.find("fields counted from 1"), std::string::npos) << msg;

  // A quoted cell on a later line, cut in the middle of a sequence.
  WriteText(dir / "cut.csv", "a,b\n1,\"x\xC3\"\n");
  auto c = CsvReader::Open(dir / "cut.csv");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->Next().ok());
  auto cut = c->Next();
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find((dir / "cut.csv") + ": line 2, column 2: "),
            std::string::npos)
      << cut.status().message();

  // Well-formed UTF-8 passes unchanged.
  WriteText(dir / "ok.csv", "id,caf\xC3\xA9\n1,2\n");
  auto rows = ReadAll(dir / "ok.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][1], "caf\xC3\xA9");
}

TEST(Csv, RecordsAcrossBufferBoundariesAndHugeRecords) {
  TempDir dir;
  std::string text = "k,v\n";
  for (int i = 0; i < 300000; ++i)
    text += std::to_string(i) + ",\"" + std::to_string(i * 3) + "\"\n";
  std::string huge(6 << 20, 'z');  // longer than the initial buffer
  text += "x," + huge + "\n";
  WriteText(dir / "a.csv", text);
  auto rows = ReadAll(dir / "a.csv");
  ASSERT_EQ(rows.size(), 300002u);
  for (int i = 0; i < 300000; i += 997) {
    EXPECT_EQ(rows[i + 1][0], std::to_string(i));
    EXPECT_EQ(rows[i + 1][1], std::to_string(i * 3));
  }
  EXPECT_EQ(rows.back()[1].size(), huge.size());
}

TEST(Csv, DigestCoversEveryByteAndOnlyAtEnd) {
  TempDir dir;
  std::string text = "a\n1\n2\n";
  WriteText(dir / "a.csv", text);
  auto r = CsvReader::Open(dir / "a.csv");
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(*r->Next());
  EXPECT_FALSE(r->Sha256Hex().ok());
  while (*r->Next()) {
  }
  EXPECT_EQ(*r->Sha256Hex(), Sha256::Hex(text));
  EXPECT_EQ(r->bytes_read(), text.size());
}

// Records, lines and digest of the rest of `path` after its header, read
// with ReadRestInParallel.
struct Parallel {
  std::vector<std::vector<std::string>> rows;
  std::vector<uint64_t> lines;
  std::string sha;
  Status status;
};
Parallel ReadParallel(const std::string& path, unsigned threads, size_t piece_bytes) {
  Parallel out;
  auto r = CsvReader::Open(path);
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(*r->Next());
  out.rows.emplace_back(r->fields().begin(), r->fields().end());
  out.lines.push_back(r->line());
  std::vector<Parallel> piece(threads);
  out.status = r->ReadRestInParallel(
      threads,
      [&](unsigned p, CsvReader& reader) {
        piece[p] = Parallel{};
        for (;;) {
          HPCML_ASSIGN_OR_RETURN(bool more, reader.Next());
          if (!more) return Status::Ok();
          piece[p].rows.emplace_back(reader.fields().begin(), reader.fields().end());
          piece[p].lines.push_back(reader.line());
        }
      },
      [&](unsigned pieces) {
        for (unsigned p = 0; p < pieces; ++p) {
          out.rows.insert(out.rows.end(), piece[p].rows.begin(), piece[p].rows.end());
          out.lines.insert(out.lines.end(), piece[p].lines.begin(), piece[p].lines.end());
        }
        return Status::Ok();
      },
      piece_bytes);
  if (out.status.ok()) out.sha = *r->Sha256Hex();
  return out;
}

TEST(Csv, InParallelReadsWhatTheSerialReaderReads) {
  TempDir dir;
  std::mt19937 rng(3);
  std::string text = "\xEF\xBB\xBFid,name,x\n";
  // More than the first read's 4 MiB, so that there are many windows, most
  // of them without a quote.
  for (int i = 0; text.size() < (5u << 20); ++i) {
    switch (i < 3000 || i % 4000 == 0 ? rng() % 20 : 4 + rng() % 16) {
      case 0:  // a quoted field across lines, with an escaped quote
        text += std::to_string(i) + ",\"a \"\"b\"\"\nc\"," + std::to_string(i) + "\n";
        break;
      case 1:
        text += "\n";  // blank
        break;
      case 2:
        text += std::to_string(i) + ",crlf," + std::to_string(i) + "\r\n";
        break;
      case 3:  // longer than a piece
        text += std::to_string(i) + "," + std::string(3000, 'w') + ",1\n";
        break;
      default:
        text += std::to_string(i) + ",n" + std::to_string(rng() % 1000) + "," +
                std::to_string(rng() % 7) + "\n";
    }
  }
  text += "last,no,newline";
  WriteText(dir / "a.csv", text);
  std::vector<uint64_t> lines;
  auto rows = ReadAll(dir / "a.csv", &lines);
  for (unsigned threads : {1u, 2u, 3u, 5u}) {
    for (size_t piece : {size_t{50000}, size_t{1} << 20}) {
      Parallel par = ReadParallel(dir / "a.csv", threads, piece);
      ASSERT_TRUE(par.status.ok()) << par.status.ToString();
      EXPECT_EQ(par.rows, rows) << threads << " threads, pieces of " << piece;
      EXPECT_EQ(par.lines, lines) << threads << " threads, pieces of " << piece;
      EXPECT_EQ(par.sha, Sha256::Hex(text));
    }
  }
}

// A quoted field whose line end is the window's last: the window must not
// end there (only outside quotes does a line end end a record).
TEST(Csv, InParallelAWindowDoesNotEndInsideQuotes) {
  TempDir dir;
  std::string text = "a,b\n";
  // More than the first read's 4 MiB, so that there are many windows.
  for (int i = 0; text.size() < (6u << 20); ++i)
    text += std::to_string(i) + ",\"x\n" + std::string(i % 13, 'y') + "\"\n";
  WriteText(dir / "a.csv", text);
  std::vector<uint64_t> lines;
  auto rows = ReadAll(dir / "a.csv", &lines);
  for (size_t piece : {size_t{61}, size_t{4093}, size_t{65536}}) {
    Parallel par = ReadParallel(dir / "a.csv", piece == 61 ? 1 : 3, piece);
    ASSERT_TRUE(par.status.ok()) << "pieces of " << piece << ": " << par.status.ToString();
    EXPECT_EQ(par.rows, rows) << "pieces of " << piece;
    EXPECT_EQ(par.lines, lines) << "pieces of " << piece;
  }
}

TEST(Csv, InParallelTheFirstErrorInTheFileIsReported) {
  TempDir dir;
  std::string text = "a,b\n";
  for (int i = 2; i <= 2000; ++i)
    text += i == 700 || i == 1500 ? "1,\xFF\n" : std::to_string(i) + ",ok\n";
  WriteText(dir / "a.csv", text);
  for (unsigned threads : {1u, 2u, 4u}) {
    Parallel par = ReadParallel(dir / "a.csv", threads, 1000);
    ASSERT_FALSE(par.status.ok());
    EXPECT_NE(par.status.message().find("a.csv: line 700, column 2: not valid UTF-8"),
              std::string::npos)
        << par.status.message();
  }
}

TEST(Csv, ErrorsNameFileLineAndColumn) {
  TempDir dir;
  WriteText(dir / "a.csv", "a,b\n1,2\n3,4\n");
  auto r = CsvReader::Open(dir / "a.csv");
  ASSERT_TRUE(*r->Next());
  ASSERT_TRUE(*r->Next());
  ASSERT_TRUE(*r->Next());
  Status st = r->ErrorAt(1, "bad");
  EXPECT_EQ(st.message(), dir / "a.csv" + ": line 3, column 2: bad");
  EXPECT_EQ(r->ErrorAtLine("short").message(), dir / "a.csv" + ": line 3: short");
}

TEST(Csv, UnterminatedQuoteAndJunkAfterQuote) {
  TempDir dir;
  WriteText(dir / "a.csv", "a\n\"open\n");
  auto r = CsvReader::Open(dir / "a.csv");
  ASSERT_TRUE(*r->Next());
  auto bad = r->Next();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unterminated quoted field"), std::string::npos);
  WriteText(dir / "b.csv", "a,b\n\"x\"y,2\n");
  auto r2 = CsvReader::Open(dir / "b.csv");
  ASSERT_TRUE(*r2->Next());
  auto bad2 = r2->Next();
  ASSERT_FALSE(bad2.ok());
  EXPECT_NE(bad2.status().message().find("line 2"), std::string::npos) << bad2.status().message();
}

TEST(Csv, MissingFile) {
  EXPECT_EQ(CsvReader::Open("/nonexistent.csv").status().code(), StatusCode::kNotFound);
}

TEST(Csv, OtherDelimiter) {
  TempDir dir;
  WriteText(dir / "a.tsv", "a\tb\n1\t2\n");
  auto r = CsvReader::Open(dir / "a.tsv", '\t');
  ASSERT_TRUE(*r->Next());
  ASSERT_TRUE(*r->Next());
  EXPECT_EQ(r->field(1), "2");
}

TEST(CsvCells, Floats) {
  bool integral = false;
  EXPECT_EQ(*ParseFloatCell(" 1.5 ", &integral), 1.5f);
  EXPECT_FALSE(integral);
  EXPECT_EQ(*ParseFloatCell("-42", &integral), -42.0f);
  EXPECT_TRUE(integral);
  EXPECT_EQ(*ParseFloatCell("+3e2"), 300.0f);
  EXPECT_TRUE(std::isnan(*ParseFloatCell("nan")));
  EXPECT_FALSE(ParseFloatCell("abc").ok());
  EXPECT_FALSE(ParseFloatCell("").ok());
  EXPECT_FALSE(ParseFloatCell("1.5x").ok());
  EXPECT_FALSE(ParseFloatCell("inf").ok());
  EXPECT_FALSE(ParseFloatCell("1e39").ok());
  EXPECT_NE(ParseFloatCell("abc").status().message().find("\"abc\" is not a number"),
            std::string::npos);
}

TEST(CsvCells, MissingWords) {
  const NaValues na = NaValues::Default();
  for (const char* cell : {"", "  ", "NA", " N/A ", "NaN", "nan", "null", "NULL", "None"}) {
    bool integral = false, missing = false;
    auto v = ParseFloatCell(cell, &integral, &na, &missing);
    ASSERT_TRUE(v.ok()) << cell;
    EXPECT_TRUE(std::isnan(*v)) << cell;
    EXPECT_TRUE(missing) << cell;
    EXPECT_TRUE(integral) << "a missing cell votes for no kind: " << cell;
  }
  bool missing = true;
  EXPECT_EQ(*ParseFloatCell("2", nullptr, &na, &missing), 2.0f);
  EXPECT_FALSE(missing);
  EXPECT_FALSE(ParseFloatCell("na", nullptr, &na).ok());  // words match exactly
  auto custom = NaValues::Parse(" -999 , ? ");
  ASSERT_TRUE(custom.ok());
  EXPECT_EQ(custom->words(), (std::vector<std::string>{"-999", "?"}));
  EXPECT_TRUE(std::isnan(*ParseFloatCell("-999", nullptr, &*custom)));
  EXPECT_FALSE(ParseFloatCell("NA", nullptr, &*custom).ok());
  EXPECT_TRUE(NaValues::Parse("")->words().empty());
  EXPECT_FALSE(NaValues::Parse("a,,b").ok());
  EXPECT_FALSE(NaValues::Parse("\"x\"").ok());
}

TEST(CsvCells, Ints) {
  EXPECT_EQ(*ParseIntCell("12"), 12);
  EXPECT_EQ(*ParseIntCell(" -7 "), -7);
  EXPECT_FALSE(ParseIntCell("1.0").ok());
  EXPECT_FALSE(ParseIntCell("99999999999999999999").ok());
  EXPECT_FALSE(ParseIntCell("").ok());
}

// What kind inference sees in a cell: every integer shape parses as an
// integer, every bool word as a boolean, and text is text.
TEST(CsvCells, ShapesForKindInference) {
  const NaValues na = NaValues::Default();
  struct Case {
    const char* cell;
    CellShape shape;
  };
  for (const Case& c : std::vector<Case>{{"", CellShape::kMissing},
                                         {" NA ", CellShape::kMissing},
                                         {"None", CellShape::kMissing},
                                         {"42", CellShape::kInt},
                                         {"+42", CellShape::kInt},
                                         {"-0", CellShape::kInt},
                                         {"9223372036854775807", CellShape::kInt},
                                         {"9223372036854775808", CellShape::kFloat},
                                         {"1.", CellShape::kFloat},
                                         {".5", CellShape::kFloat},
                                         {"-2.5e-3", CellShape::kFloat},
                                         {"1e5", CellShape::kFloat},
                                         {"inf", CellShape::kFloat},
                                         {"TRUE", CellShape::kBool},
                                         {"False", CellShape::kBool},
                                         {"yes", CellShape::kText},
                                         {"+-5", CellShape::kText},
                                         {"1e", CellShape::kText},
                                         {"term_36", CellShape::kText},
                                         {"-", CellShape::kText}}) {
    EXPECT_EQ(ClassifyCell(c.cell, na), c.shape) << c.cell;
    if (c.shape == CellShape::kInt) {
      EXPECT_TRUE(ParseIntCell(c.cell).ok()) << c.cell;
    }
    if (c.shape == CellShape::kBool) {
      EXPECT_TRUE(ParseBoolCell(c.cell).ok()) << c.cell;
    }
  }
  EXPECT_EQ(*ParseNumericLabel("TRUE"), 1.0f);
  EXPECT_EQ(*ParseNumericLabel(" 0.25"), 0.25f);
  EXPECT_NE(ParseNumericLabel("x").status().message().find("\"x\" is not a number"),
            std::string::npos);
  EXPECT_EQ(*ParseBoolCell("1"), true);
  EXPECT_EQ(*ParseBoolCell(" false "), false);
  EXPECT_NE(ParseBoolCell("yes").status().message().find("\"yes\" is not a boolean"),
            std::string::npos);
}

}  // namespace
}  // namespace hpcml::featurecache
