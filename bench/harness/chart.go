package harness

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
)

// toolColors are the bar colours, by position in Report.Tools.
var toolColors = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"}

// chart geometry, in SVG user units.
const (
	chartW, panelH      = 900, 300
	marginL, marginR    = 70, 20
	marginTop, marginB  = 40, 50
	headerH, legendH    = 50, 30
	barGap, groupMargin = 2, 0.2
)

// WriteSVG draws the report's medians as an SVG chart: one panel of
// throughput (MB/s) and one of peak RSS (MiB), bars grouped by scenario,
// one bar per tool. Written by hand: two bar panels do not need a
// plotting library.
func WriteSVG(w io.Writer, r *Report) error {
	var b bytes.Buffer
	h := headerH + legendH + 2*(panelH+marginTop+marginB)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", chartW, h, chartW, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	text(&b, 10, 22, "start", 16, fmt.Sprintf("lifeboat-bench: %s %s corpus (%d files, %.0f MB), %d round(s), medians", r.Scale, r.Shape, r.Corpus.Files, float64(r.Corpus.Bytes)/1e6, r.Rounds))
	text(&b, 10, 40, "start", 11, fmt.Sprintf("%d CPUs (%s), load %s at start; restore includes a syncfs after the tool exits", r.Machine.CPUs, r.Machine.CPUModel, r.Machine.LoadStart))
	for i, t := range r.Tools {
		x := float64(marginL + i*160)
		fmt.Fprintf(&b, `<rect x="%.0f" y="%d" width="14" height="14" fill="%s"/>`+"\n", x, headerH+4, toolColors[i%len(toolColors)])
		text(&b, x+20, float64(headerH+15), "start", 12, t.Name)
	}
	top := float64(headerH + legendH)
	panel(&b, r, top, "Throughput, MB/s (higher is better; prune: repository MB before prune per second)", func(x Result) float64 { return x.MBps })
	panel(&b, r, top+panelH+marginTop+marginB, "Peak RSS, MiB (lower is better)", func(x Result) float64 { return float64(x.MaxRSS) / (1 << 20) })
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// panel draws one grouped bar chart with its top edge at y0.
func panel(b *bytes.Buffer, r *Report, y0 float64, title string, value func(Result) float64) {
	text(b, marginL, y0+20, "start", 13, title)
	plotTop, plotH := y0+marginTop, float64(panelH)
	plotW := float64(chartW - marginL - marginR)
	top := 0.0
	for _, m := range r.Medians {
		top = math.Max(top, value(m))
	}
	step := niceStep(top / 5)
	top = math.Max(step, math.Ceil(top/step)*step)
	for v := 0.0; v <= top+step/2; v += step {
		y := plotTop + plotH - v/top*plotH
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#ddd"/>`+"\n", marginL, y, marginL+plotW, y)
		text(b, marginL-6, y+4, "end", 11, trimFloat(v))
	}
	groupW := plotW / float64(len(Scenarios))
	n := max(1, len(r.Tools))
	barW := groupW * (1 - 2*groupMargin) / float64(n)
	for i, sc := range Scenarios {
		gx := float64(marginL) + float64(i)*groupW
		text(b, gx+groupW/2, plotTop+plotH+18, "middle", 12, sc)
		for j, t := range r.Tools {
			m, ok := r.Median(t.Name, sc)
			if !ok {
				continue
			}
			v := value(m)
			bh := v / top * plotH
			x := gx + groupW*groupMargin + float64(j)*barW
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s</title></rect>`+"\n",
				x, plotTop+plotH-bh, barW-barGap, bh, toolColors[j%len(toolColors)], esc(t.Name), esc(sc), trimFloat(v))
			text(b, x+(barW-barGap)/2, plotTop+plotH-bh-3, "middle", 10, trimFloat(v))
		}
	}
	fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%.0f" y2="%.1f" stroke="black"/>`+"\n", marginL, plotTop+plotH, marginL+plotW, plotTop+plotH)
}

func text(b *bytes.Buffer, x, y float64, anchor string, size int, s string) {
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="%s" font-size="%d">%s</text>`+"\n", x, y, anchor, size, esc(s))
}

func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s)) // writes to a buffer: cannot fail
	return b.String()
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

// trimFloat prints v with at most one decimal, none when it is large.
func trimFloat(v float64) string {
	if v >= 100 || v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}
