# plot.gp - the figure of `linformer bench --plot FILE`.
# usage: gnuplot -c plot.gp DATA BLOCKS KIND > FILE
#   DATA: one block per series (device, mode, k), first line its title, then
#         "n median_ms device_MiB" rows; blocks are separated by two blank lines.
#   KIND: png, svg or pdf; the figure goes to standard output.
# Left: median time against n; right: device memory of the layer against n; log-log.
data = ARG1
blocks = int(ARG2)
kind = ARG3
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

set multiplot layout 1,2 title "linformer bench: Linformer against dense and flash attention"
set logscale x 2
set logscale y 10
set format x "%.0f"
set xlabel "sequence length n"
set grid
set key top left


set ylabel "median time per forward (ms)"
set title "time"
plot for [i=0:blocks-1] data index i using 1:2 with linespoints title columnheader(1)

set ylabel "device memory of the layer (MiB)"
set title "memory (weights + workspace)"
plot for [i=0:blocks-1] data index i using 1:3 with linespoints title columnheader(1)
unset multiplot
