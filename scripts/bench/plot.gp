# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# plot.gp - one chart of the benchmark suite: every data block of DATAFILE
# (columns: message size in bytes, median, min, max) as a line with min-max
# error bars, switch and TCP on the same axes. Called by report.py with:
#   gnuplot -e 'datafile="..."; outfile="..."; ttl="..."; ylab="...";
#               titles="\"a\" \"b\""; nblocks=N; logy=0|1' plot.gp
set terminal pngcairo size 1000,620 font ",11"
set output outfile
set title ttl
set xlabel "message size (bytes)"
set ylabel ylab
set logscale x 2
set format x "%.0b %BB"
if (logy) set logscale y 10
set key outside right top
set grid
# blocks come in pairs (switch, TCP): one colour per pair, TCP dashed
set linetype 1 lc rgb "#1f5fb4" dt 1
set linetype 2 lc rgb "#1f5fb4" dt 2
set linetype 3 lc rgb "#e07010" dt 1
set linetype 4 lc rgb "#e07010" dt 2
set linetype 5 lc rgb "#20902c" dt 1
set linetype 6 lc rgb "#20902c" dt 2
plot for [i=0:nblocks-1] datafile index i using 1:2:3:4 \
	title word(titles, i + 1) \
	with yerrorlines lt (i + 1) lw 2 pt 7 ps 0.8
