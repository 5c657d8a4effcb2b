package console

import (
	"encoding/xml"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/store/usage"
)

// rect is a bar of the chart.
type rect struct {
	class string
	y, h  float64
}

// parseChart checks the SVG is well-formed and returns its bars and the
// ceiling line's y, if drawn.
func parseChart(t *testing.T, svg string) (bars []rect, ceilingY float64, hasCeiling bool) {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(svg))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("the chart is not well-formed XML: %v\n%s", err, svg)
		}
		el, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		attr := map[string]string{}
		for _, a := range el.Attr {
			attr[a.Name.Local] = a.Value
		}
		num := func(k string) float64 {
			v, _ := strconv.ParseFloat(attr[k], 64)
			return v
		}
		switch {
		case el.Name.Local == "rect":
			bars = append(bars, rect{class: attr["class"], y: num("y"), h: num("height")})
		case el.Name.Local == "line" && attr["class"] == "ceiling":
			ceilingY, hasCeiling = num("y1"), true
		}
	}
}

func TestChartScalesToTheCeiling(t *testing.T) {
	start := time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)
	c := hourlyChart{Start: start, Hours: 168, Ceiling: 60, Usage: []usage.Hour{
		{Hour: start.Add(10 * time.Hour), Admitted: 30},
		{Hour: start.Add(167 * time.Hour), Admitted: 60, Refused: 6},
	}}
	svg := string(c.SVG())
	bars, ceilingY, ok := parseChart(t, svg)
	if len(bars) != 3 {
		t.Fatalf("%d bars, want 2 admitted and 1 refused", len(bars))
	}
	if !ok {
		t.Fatal("no ceiling line")
	}
	half, full, refused := bars[0], bars[1], bars[2]
	if full.class != "admitted" || refused.class != "refused" {
		t.Fatalf("bar classes %q %q", full.class, refused.class)
	}
	// Heights are proportional: 60 admitted is twice 30, and the bar of 60
	// reaches the ceiling line exactly.
	if d := full.h - 2*half.h; d > 0.05 || d < -0.05 {
		t.Errorf("bar of 60 is %v high, bar of 30 %v", full.h, half.h)
	}
	if d := full.y - ceilingY; d > 0.05 || d < -0.05 {
		t.Errorf("the bar at the ceiling tops at %v, the ceiling line is at %v", full.y, ceilingY)
	}
	// 429s stack on top of the admitted requests.
	if d := refused.y + refused.h - full.y; d > 0.05 || d < -0.05 {
		t.Errorf("refused bar does not sit on the admitted one: %+v on %+v", refused, full)
	}
	if !strings.Contains(svg, `role="img"`) || !strings.Contains(svg, "6 refused") {
		t.Error("the chart has no accessible summary")
	}
}

func TestChartMarksACeilingFarAbove(t *testing.T) {
	start := time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)
	c := hourlyChart{Start: start, Hours: 168, Ceiling: 7200, Usage: []usage.Hour{
		{Hour: start.Add(100 * time.Hour), Admitted: 8},
	}}
	bars, _, hasLine := parseChart(t, string(c.SVG()))
	if hasLine {
		t.Error("a ceiling 900 times the traffic is drawn on the chart, flattening it")
	}
	if len(bars) != 1 || bars[0].h < chartPlot/2 {
		t.Errorf("the only bar should fill most of the plot, got %+v", bars)
	}
	if !strings.Contains(string(c.SVG()), "ceiling 7.2k/h") {
		t.Error("the off-scale ceiling is not named")
	}
	if top, off := c.scale(); top != 10 || !off {
		t.Errorf("scale %v %v, want 10 and off", top, off)
	}
}

func TestNiceCeil(t *testing.T) {
	for in, want := range map[float64]float64{0.5: 1, 1: 1, 9.2: 10, 11: 20, 23: 25, 41: 50, 420: 500} {
		if got := niceCeil(in); got != want {
			t.Errorf("niceCeil(%v) = %v, want %v", in, got, want)
		}
	}
}
