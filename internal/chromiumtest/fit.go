package chromiumtest

import "testing"

// FitsWidth fails the test when the page scrolls sideways, when an
// element reaches past the viewport's right edge, or when one hides
// content behind its own horizontal scroll bar: everything must be
// readable at the viewport's width without scrolling sideways.
func FitsWidth(t testing.TB, b *Browser) {
	t.Helper()
	var r struct {
		ScrollWidth, InnerWidth int
		Wide                    []string
	}
	b.Eval(`(() => {
		const w = window.innerWidth, wide = [];
		for (const e of document.body.querySelectorAll("*")) {
			const r = e.getBoundingClientRect();
			const name = e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className ? "." + String(e.className).split(" ").join(".") : "");
			if (r.width > 0 && r.right > w + 0.5) wide.push(name + " reaches " + Math.round(r.right) + " px");
			else if (e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== "visible") wide.push(name + " scrolls sideways (" + e.scrollWidth + " > " + e.clientWidth + " px)");
		}
		return { ScrollWidth: document.documentElement.scrollWidth, InnerWidth: w, Wide: wide.slice(0, 10) };
	})()`, &r)
	if r.ScrollWidth > r.InnerWidth || len(r.Wide) > 0 {
		t.Fatalf("the page does not fit %d px (it is %d px wide): %v", r.InnerWidth, r.ScrollWidth, r.Wide)
	}
}
