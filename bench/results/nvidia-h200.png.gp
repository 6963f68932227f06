# plot.gp - the figure of `linformer bench --plot FILE`.
# usage: gnuplot -c plot.gp DATA BLOCKS KIND COLOURS DASHES SHAPE > FILE
#   DATA: one block per series (device, mode, k), first line its title, then
#         "n median_ms device_MiB" rows; blocks are separated by two blank lines.
#   KIND: png, svg or pdf; the figure goes to standard output.
#   COLOURS, DASHES: per block, the colour of its mode (and k) and the dash of
#         its device, as words "1 2 3 ..."; SHAPE: the layer's, for the title.
# Left: median time against n; right: device memory of the layer against n; log-log.
data = ARG1
blocks = int(ARG2)
kind = ARG3
colour_of = ARG4
dash_of = ARG5
shape = ARG6
cairo = strstrt(GPVAL_TERMINALS, "cairo") > 0

if (kind eq "png") {
    if (cairo) { set terminal pngcairo size 1400,560 font ",10" } else { set terminal png size 1400,560 }
} else {
    if (kind eq "svg") {
        set terminal svg size 1400,560 font ",10"
    } else {
        if (kind eq "pdf" && cairo) { set terminal pdfcairo size 14in,5.6in font ",10" } else {
            print sprintf("plot.gp: cannot draw \"%s\" (png, svg, or pdf with cairo)", kind); exit status 1
        }
    }
}

# distinguishable colours (the default cycle has a pale yellow), then repeated
colours = "#1f77b4 #d62728 #2ca02c #ff7f0e #9467bd #8c564b #e377c2 #17becf #7f7f7f #bcbd22"
do for [i=1:words(colours)] { set linetype i linecolor rgb word(colours, i) linewidth 1.5 pointtype i }
set linetype cycle words(colours)

set termoption noenhanced # device names and "d_model" are plain text

# A single n or a single value spans nothing on a log axis: give it a range around the point.
stats data using 1 nooutput
if (STATS_min == STATS_max) { set xrange [STATS_min / 1.5 : STATS_max * 1.5] }
array ymin[3]
array ymax[3]
do for [c=2:3] { stats data using c nooutput; ymin[c] = STATS_min; ymax[c] = STATS_max }

set multiplot layout 1,2 title "linformer bench: Linformer against dense and flash attention (".shape.")"
set logscale x 2
set logscale y 10
set format x "%.0f"
set xlabel "sequence length n"
set grid
set key top left Left reverse # the lines rise to the right

# colour: the mode (and k); dash: the device
set ylabel "median time per forward (ms)"
set title "time"
if (ymin[2] == ymax[2]) { set yrange [ymin[2] / 1.5 : ymax[2] * 1.5] }
plot for [i=0:blocks-1] data index i using 1:2 with linespoints lt (word(colour_of, i + 1) + 0) \
     dt 0 + word(dash_of, i + 1) title columnheader(1)

set ylabel "device memory of the layer (MiB)"
set title "memory (weights + workspace)"
if (ymin[3] == ymax[3]) { set yrange [ymin[3] / 1.5 : ymax[3] * 1.5] } else { set autoscale y }
plot for [i=0:blocks-1] data index i using 1:3 with linespoints lt (word(colour_of, i + 1) + 0) \
     dt 0 + word(dash_of, i + 1) title columnheader(1)
unset multiplot
