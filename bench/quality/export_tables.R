# Writes the quality benchmark's tables as CSV with R's write.csv.
#
# Usage: Rscript bench/quality/export_tables.R OUTDIR
#
# Contract: each table is written as R has it (factors as their level names,
# missing values as NA, R's row names as the unnamed first column), with only
# these columns added in front: `id` (1..n) and `ts` (ISO 8601 UTC, one second
# apart from 2020-01-01T00:00:00Z), which hpcml-fcache needs as entity and
# timestamp, and a text label where the table has none. Nothing else is edited.
#
# Tables (Debian packages r-cran-aer, r-cran-ggplot2, r-cran-mlbench):
#   hmda.csv       AER::HMDA, label deny (no/yes)
#   creditcard.csv AER::CreditCard, label card (no/yes)
#   diamonds.csv   ggplot2::diamonds, label expensive (no/yes: price > median
#                  price), price dropped (it is the label)
#   pima2.csv      mlbench::PimaIndiansDiabetes2, label diabetes (neg/pos):
#                  numeric only, but with many NA (the AER and ggplot2 tables
#                  have none)
# A table whose package is missing is skipped with a message.

args <- commandArgs(trailingOnly = TRUE)
outdir <- if (length(args) >= 1) args[1] else "."
dir.create(outdir, showWarnings = FALSE, recursive = TRUE)

# Prepends id and ts to `df` and writes it to OUTDIR/NAME.csv with write.csv.
write_table <- function(df, name) {
  n <- nrow(df)
  ts <- format(as.POSIXct("2020-01-01", tz = "UTC") + seq_len(n) - 1,
               "%Y-%m-%dT%H:%M:%SZ", tz = "UTC")
  out <- cbind(data.frame(id = seq_len(n), ts = ts), df)
  path <- file.path(outdir, paste0(name, ".csv"))
  write.csv(out, path)
  cat(sprintf("%s: %d rows, %d columns, %d NA cells\n", path, n, ncol(df),
              sum(is.na(df))))
}

# Loads dataset `name` from `pkg`, or returns NULL when the package is missing.
load_data <- function(name, pkg) {
  if (!requireNamespace(pkg, quietly = TRUE)) {
    message(sprintf("skipping %s: R package %s is not installed", name, pkg))
    return(NULL)
  }
  e <- new.env()
  data(list = name, package = pkg, envir = e)
  get(name, envir = e)
}

hmda <- load_data("HMDA", "AER")
if (!is.null(hmda)) write_table(hmda, "hmda")

cc <- load_data("CreditCard", "AER")
if (!is.null(cc)) write_table(cc, "creditcard")

dm <- load_data("diamonds", "ggplot2")
if (!is.null(dm)) {
  dm <- as.data.frame(dm)
  dm$expensive <- factor(ifelse(dm$price > median(dm$price), "yes", "no"))
  dm$price <- NULL
  write_table(dm, "diamonds")
}

pima <- load_data("PimaIndiansDiabetes2", "mlbench")
if (!is.null(pima)) write_table(pima, "pima2")
