# rank.gp - the figure of `linformer rank --plot FILE`.
# usage: gnuplot -c rank.gp DATA BLOCKS KIND LAYERS HEADS N > FILE
#   DATA: BLOCKS blocks, one per layer and head, first line its title, then
#         "r c_r" rows (the mean normalised cumulative spectrum over the
#         sequences); then one block of "layer head mean_k90" rows. Blocks are
#         separated by two blank lines.
#   KIND: png, svg or pdf; the figure goes to standard output.
#   N: the longest sequence; the heat map's colours span 0 .. N.
# Left: the spectra, as the paper's Figure 1; right: a heat map of k90.
data = ARG1
blocks = int(ARG2)
kind = ARG3
layers = int(ARG4)
heads = int(ARG5)
n = int(ARG6)
cairo = strstrt(GPVAL_TERMINALS, "cairo") > 0

if (kind eq "png") {
    if (cairo) { set terminal pngcairo size 1400,560 font ",10" } else { set terminal png size 1400,560 }
} else {
    if (kind eq "svg") {
        set terminal svg size 1400,560 font ",10"
    } else {
        if (kind eq "pdf" && cairo) { set terminal pdfcairo size 14in,5.6in font ",10" } else {
            print sprintf("rank.gp: cannot draw \"%s\" (png, svg, or pdf with cairo)", kind); exit status 1
        }
    }
}

colours = "#1f77b4 #d62728 #2ca02c #ff7f0e #9467bd #8c564b #e377c2 #17becf #7f7f7f #bcbd22"
do for [i=1:words(colours)] { set linetype i linecolor rgb word(colours, i) linewidth 1.5 }
set linetype cycle words(colours)

set multiplot layout 1,2 title "linformer rank: how much rank the attention matrices P need"

set title "normalised cumulative singular values of P"
set xlabel "r (singular values, largest first)"
set ylabel "c_r"
set yrange [0:1.02]
set grid
set key bottom right
if (blocks > 12) { unset key }
plot for [i=0:blocks-1] data index i using 1:2 with lines title columnheader(1), \
     0.9 with lines dashtype 2 linecolor rgb "#888888" title "0.90"

set title sprintf("k90 (mean over the sequences; colours from 0 to n = %d)", n)
set xlabel "head"
set ylabel "layer"
unset grid
unset key
set yrange [-0.5:layers-0.5] reverse
set xrange [-0.5:heads-0.5]
set xtics 1
set ytics 1
set palette defined (0 "#fff5eb", 1 "#fd8d3c", 2 "#7f2704")
set cbrange [0:n]
set style fill solid 1.0 noborder
plot data index blocks using 2:1:(0.5):(0.5):3 with boxxyerror linecolor palette, \
     data index blocks using 2:1:(sprintf("%.1f", $3)) with labels
unset multiplot
