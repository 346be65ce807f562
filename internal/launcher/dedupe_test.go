package launcher

import (
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/matrix"
)

func cellOf(id string) matrix.Cell {
	c := matrix.Cell{ID: id}
	for _, kv := range strings.Split(id, ",") {
		a, v, _ := strings.Cut(kv, "=")
		c.Values = append(c.Values, matrix.AxisValue{Axis: a, Value: v})
	}
	return c
}

// TestAutoFirst: each auto cell moves just before the first cell it could
// resolve to; the reference stays first and the rest keep their order.
func TestAutoFirst(t *testing.T) {
	var cells []matrix.Cell
	for _, id := range []string{"m=x,g=a", "m=y,g=a", "m=x,g=b", "m=auto,g=b", "m=auto,g=a", "m=auto,g=c", "m=y,g=b"} {
		cells = append(cells, cellOf(id))
	}
	var got []string
	for _, c := range AutoFirst(cells, "m=x,g=a") {
		got = append(got, c.ID)
	}
	want := "m=x,g=a m=auto,g=a m=y,g=a m=auto,g=b m=x,g=b m=auto,g=c m=y,g=b"
	if strings.Join(got, " ") != want {
		t.Errorf("AutoFirst:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
}
