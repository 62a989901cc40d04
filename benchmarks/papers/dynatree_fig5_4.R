# Thesis Fig. 5.4: dynamic trees (Taddy et al. 2011, the authors' R package dynaTree) on
# the thesis' classification data, as Sec. 5.7.3 runs them: multinomial leaves
# (model = "class"), 100 particles, R = 2 passes (dynaTrees; the package does not run
# R = 1), every other parameter at its default, fitted on the first fraction of the
# training stream and scored on the test rows.
#
# Usage: Rscript dynatree_fig5_4.R DIR
# DIR holds, per data set and seed, <name>_train.csv and <name>_test.csv (features in
# [0, 1], the class code 0 .. K-1 in the last column, training rows in stream order) and
# fractions.txt (the stream fractions to score, in mini-batches of 100); the script writes
# DIR/<name>_dynatree.csv with the columns batches, n, accuracy, seconds.
suppressPackageStartupMessages(library(dynaTree))

args <- commandArgs(trailingOnly = TRUE)
dir <- args[1]
batches <- scan(file.path(dir, "fractions.txt"), quiet = TRUE)
names <- sub("_train\\.csv$", "", list.files(dir, pattern = "_train\\.csv$"))
for (name in names) {
  train <- as.matrix(read.csv(file.path(dir, paste0(name, "_train.csv")), header = FALSE))
  test <- as.matrix(read.csv(file.path(dir, paste0(name, "_test.csv")), header = FALSE))
  d <- ncol(train) - 1
  seed <- as.integer(sub(".*_s", "", name))
  n_all <- nrow(train)
  # the mini-batch ends of numpy.array_split(range(n), 100)
  sizes <- rep(n_all %/% 100, 100) + c(rep(1, n_all %% 100), rep(0, 100 - n_all %% 100))
  ends <- cumsum(sizes)
  rows <- list()
  for (b in batches) {
    m <- ends[b]
    set.seed(seed * 1000 + b)
    start <- proc.time()[3]
    fit <- dynaTrees(train[1:m, 1:d, drop = FALSE], train[1:m, d + 1] + 1, N = 100, R = 2,
                     model = "class", XX = test[, 1:d, drop = FALSE], verb = 0, pverb = 0)
    seconds <- proc.time()[3] - start
    # column j of p is the label j, the class code j - 1
    pred <- max.col(fit$p, ties.method = "first") - 1
    acc <- mean(pred == test[, d + 1])
    rows[[length(rows) + 1]] <- data.frame(batches = b, n = m, accuracy = acc,
                                           seconds = seconds)
    cat(name, b, m, acc, seconds, "\n")
  }
  write.csv(do.call(rbind, rows), file.path(dir, paste0(name, "_dynatree.csv")),
            row.names = FALSE)
}
