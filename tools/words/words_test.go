package words

import (
	"strings"
	"testing"
)

func TestQuoteCutsLongNames(t *testing.T) {
	long := strings.Repeat("é", 100)
	if got, want := Quote(long), `"`+strings.Repeat("é", MaxEchoRunes)+`…" (100 characters)`; got != want {
		t.Fatalf("Quote(100 × é) = %s, want %s", got, want)
	}
	if got := Quote("orders"); got != `"orders"` {
		t.Fatalf("Quote(orders) = %s", got)
	}
}

func TestClipQuotedKeepsNamesWhole(t *testing.T) {
	name := strings.Repeat("n", 63)
	msg := `relation "` + name + `" and "` + strings.Repeat("x", 500) + `"`
	got := ClipQuoted(msg)
	if !strings.Contains(got, `"`+name+`"`) {
		t.Fatalf("a 63-character name was cut: %s", got)
	}
	if strings.Contains(got, strings.Repeat("x", MaxEchoRunes+1)) || !strings.Contains(got, "(500 characters)") {
		t.Fatalf("a 500-character span was not cut: %s", got)
	}
}

func TestClosest(t *testing.T) {
	names := []string{"orders", "order_items", "customers", "Orders2", "events"}
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"ordres", []string{"orders"}},
		{"custmers", []string{"customers"}},
		{"zzzz", []string{}},
		{"ORDERS", []string{"orders", "Orders2"}},
	} {
		got := Closest(tc.in, names, 2)
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("Closest(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if d := EditDistance("kitten", "sitting"); d != 3 {
		t.Errorf("EditDistance(kitten, sitting) = %d, want 3", d)
	}
	if got := List(nil); got != "none" {
		t.Errorf("List(nil) = %q", got)
	}
	if got := ASCIILower("ÀBc"); got != "Àbc" {
		t.Errorf("ASCIILower folds only A-Z: %q", got)
	}
}
