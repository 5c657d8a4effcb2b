package console

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strings"
	"time"

	"github.com/practicegw/practicegw/store/usage"
)

// hourlyChart is a credential's requests per hour as stacked bars
// (admitted, then refused with 429) against its ceiling, drawn as SVG on
// the server so the page needs no script and no chart library.
type hourlyChart struct {
	// Start is the first hour shown, UTC and on the hour.
	Start time.Time
	Hours int
	Usage []usage.Hour
	// Ceiling is the credential's limit in requests per hour; 0 for none.
	Ceiling float64
}

// Geometry, in SVG user units. The SVG scales to its container.
const (
	chartSlot   = 5.0 // horizontal room per hour
	chartBar    = 4.0
	chartLeft   = 46.0
	chartRight  = 104.0
	chartTop    = 14.0
	chartPlot   = 120.0
	chartBottom = 22.0
)

// scale returns the value at the top of the plot and whether the ceiling
// lies above it. When traffic is far below the ceiling, drawing both to
// one scale would flatten the bars to nothing, so the plot scales to the
// traffic and marks the ceiling as off the top.
func (c hourlyChart) scale() (top float64, ceilingOff bool) {
	peak := float64(c.peak())
	if c.Ceiling > 0 && peak >= c.Ceiling/10 {
		return math.Max(peak, c.Ceiling) * 1.08, false
	}
	top = niceCeil(math.Max(peak, 1) * 1.15)
	return top, c.Ceiling > top
}

func (c hourlyChart) peak() int64 {
	var p int64
	for _, u := range c.Usage {
		p = max(p, u.Admitted+u.Refused)
	}
	return p
}

// niceCeil rounds v up to 1, 2, 2.5 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	exp := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*exp >= v {
			return m * exp
		}
	}
	return 10 * exp
}

// y maps a count to its SVG y coordinate.
func (c hourlyChart) y(v, top float64) float64 {
	return chartTop + chartPlot - v/top*chartPlot
}

// SVG renders the chart.
func (c hourlyChart) SVG() template.HTML {
	top, ceilingOff := c.scale()
	width := chartLeft + float64(c.Hours)*chartSlot + chartRight
	height := chartTop + chartPlot + chartBottom
	byHour := map[int64]usage.Hour{}
	var admitted, refused int64
	for _, u := range c.Usage {
		byHour[u.Hour.Unix()/3600] = u
		admitted += u.Admitted
		refused += u.Refused
	}
	var b strings.Builder
	summary := fmt.Sprintf("Requests per hour over %d days: %s admitted, %s refused with 429, peak %s in an hour",
		c.Hours/24, thousands(admitted), thousands(refused), thousands(c.peak()))
	if c.Ceiling > 0 {
		summary += fmt.Sprintf(", ceiling %s per hour", thousands(int64(c.Ceiling)))
	}
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg">`,
		width, height, html.EscapeString(summary+"."))
	fmt.Fprintf(&b, `<title>%s.</title>`, html.EscapeString(summary))

	right := chartLeft + float64(c.Hours)*chartSlot
	c.writeGrid(&b, top, ceilingOff, right)
	c.writeDays(&b)
	c.writeBars(&b, top, byHour)
	c.writeCeiling(&b, top, ceilingOff, right)
	fmt.Fprintf(&b, `<line class="baseline" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`,
		chartLeft, chartTop+chartPlot, right, chartTop+chartPlot)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// writeGrid writes the grid and axis labels: zero, half and the
// reference value (the ceiling when it is on the chart, else the top).
func (c hourlyChart) writeGrid(b *strings.Builder, top float64, ceilingOff bool, right float64) {
	ref := top
	if c.Ceiling > 0 && !ceilingOff {
		ref = c.Ceiling
	}
	for _, v := range []float64{0, ref / 2, ref} {
		if v == ref && c.Ceiling > 0 && !ceilingOff {
			continue // the ceiling line stands in for this grid line
		}
		y := c.y(v, top)
		fmt.Fprintf(b, `<line class="grid" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, chartLeft, y, right, y)
		fmt.Fprintf(b, `<text class="axis" x="%.1f" y="%.1f" text-anchor="end">%s</text>`, chartLeft-6, y+3.5, compact(v))
	}
}

// writeDays writes the day boundaries, labelled under the middle of each
// day.
func (c hourlyChart) writeDays(b *strings.Builder) {
	for i := 0; i < c.Hours; i++ {
		hour := c.Start.Add(time.Duration(i) * time.Hour)
		if hour.Hour() != 0 && i != 0 {
			continue
		}
		x := chartLeft + float64(i)*chartSlot
		if i != 0 {
			fmt.Fprintf(b, `<line class="day" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, x, chartTop, x, chartTop+chartPlot+4)
		}
		hoursLeft := min(24-hour.Hour(), c.Hours-i)
		if hoursLeft >= 8 {
			mid := x + float64(hoursLeft)*chartSlot/2
			fmt.Fprintf(b, `<text class="axis" x="%.1f" y="%.1f" text-anchor="middle">%s</text>`,
				mid, chartTop+chartPlot+16, hour.Format("Mon 2"))
		}
	}
}

// writeBars writes the bars: admitted at the bottom, refused stacked on
// top in the warning colour. A non-zero count is never drawn thinner than
// a pixel.
func (c hourlyChart) writeBars(b *strings.Builder, top float64, byHour map[int64]usage.Hour) {
	for i := 0; i < c.Hours; i++ {
		hour := c.Start.Add(time.Duration(i) * time.Hour)
		u, ok := byHour[hour.Unix()/3600]
		if !ok || u.Admitted+u.Refused == 0 {
			continue
		}
		x := chartLeft + float64(i)*chartSlot
		base := chartTop + chartPlot
		tip := fmt.Sprintf("%s–%s UTC: %s admitted, %s refused", hour.Format("Mon 2 Jan 15:00"),
			hour.Add(time.Hour).Format("15:00"), thousands(u.Admitted), thousands(u.Refused))
		fmt.Fprintf(b, `<g class="hour"><title>%s</title>`, html.EscapeString(tip))
		if u.Admitted > 0 {
			h := math.Max(float64(u.Admitted)/top*chartPlot, 1)
			fmt.Fprintf(b, `<rect class="admitted" x="%.1f" y="%.2f" width="%.1f" height="%.2f"/>`, x, base-h, chartBar, h)
			base -= h
		}
		if u.Refused > 0 {
			h := math.Max(float64(u.Refused)/top*chartPlot, 1)
			fmt.Fprintf(b, `<rect class="refused" x="%.1f" y="%.2f" width="%.1f" height="%.2f"/>`, x, base-h, chartBar, h)
		}
		b.WriteString(`</g>`)
	}
}

// writeCeiling writes the ceiling, or where it is when it is far above.
func (c hourlyChart) writeCeiling(b *strings.Builder, top float64, ceilingOff bool, right float64) {
	if c.Ceiling > 0 {
		label := "ceiling " + compact(c.Ceiling) + "/h"
		if ceilingOff {
			fmt.Fprintf(b, `<text class="ceiling-label" x="%.1f" y="%.1f">%s</text>`, right+6, chartTop+4, label)
			fmt.Fprintf(b, `<text class="axis" x="%.1f" y="%.1f">↑ far above</text>`, right+6, chartTop+17)
		} else {
			y := c.y(c.Ceiling, top)
			fmt.Fprintf(b, `<line class="ceiling" x1="%.1f" y1="%.2f" x2="%.1f" y2="%.2f"/>`, chartLeft, y, right, y)
			fmt.Fprintf(b, `<text class="ceiling-label" x="%.1f" y="%.1f">%s</text>`, right+6, y+4, label)
		}
	}
}

// compact writes a count briefly: 950, 7.2k, 1.5M.
func compact(v float64) string {
	switch {
	case v >= 1e6:
		return trimZero(fmt.Sprintf("%.1f", v/1e6)) + "M"
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 1e3:
		return trimZero(fmt.Sprintf("%.1f", v/1e3)) + "k"
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	}
	return trimZero(fmt.Sprintf("%.1f", v))
}

func trimZero(s string) string { return strings.TrimSuffix(s, ".0") }
