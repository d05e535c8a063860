package web

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
)

// The SVG that Graphviz writes is not inlined as it comes: sanitizeSVG
// parses it and writes a new document from an allowlist, escaping every
// text and attribute value itself. So even if a label escaped the DOT
// quoting, or Graphviz mis-escaped something, nothing but inert shapes,
// text and links to this UI can reach the page.

const (
	svgNS   = "http://www.w3.org/2000/svg"
	xlinkNS = "http://www.w3.org/1999/xlink"
)

// svgElements are the elements kept. Anything else (script, style,
// foreignObject, image, use…) is dropped with its whole subtree; <a> is
// unwrapped and <title> replaced (see sanitizeSVG).
var svgElements = map[string]bool{
	"svg": true, "g": true, "polygon": true, "polyline": true, "path": true,
	"ellipse": true, "circle": true, "rect": true, "line": true, "text": true,
}

// svgAttrs are the presentation attributes kept (no namespace). Event
// handlers, style, href outside <a> and anything unknown are dropped.
var svgAttrs = map[string]bool{
	"id": true, "class": true, "transform": true, "fill": true, "fill-opacity": true,
	"stroke": true, "stroke-width": true, "stroke-opacity": true, "stroke-dasharray": true,
	"stroke-linecap": true, "stroke-linejoin": true, "opacity": true,
	"points": true, "d": true, "cx": true, "cy": true, "r": true, "rx": true, "ry": true,
	"x": true, "y": true, "x1": true, "y1": true, "x2": true, "y2": true,
	"text-anchor": true, "font-family": true, "font-size": true, "font-weight": true,
	"font-style": true, "text-decoration": true, "width": true, "height": true, "viewBox": true,
}

// maxSVGDepth bounds element nesting; Graphviz output is a few levels deep.
const maxSVGDepth = 32

// errUnsafeSVG marks Graphviz output the sanitizer refused as a whole.
var errUnsafeSVG = errors.New("web: unusable SVG")

// svgLinks is what sanitizeSVG adds to a Graphviz drawing: per node (by
// its DOT name, which Graphviz writes as the group's <title>) a link and a
// tooltip, per edge (by "tail->head") a tooltip. Links and tooltips never
// pass through Graphviz, whose escString expansion (\N, \G, \L…) would
// alter them.
type svgLinks struct {
	nodes map[string]nodeLink
	edges map[string]string
}

type nodeLink struct{ href, title string }

// svgFrame is one open element of the output.
type svgFrame struct {
	name   string
	kind   string // "node" or "edge" for Graphviz's node and edge groups
	unwrap bool   // an input <a>: its children are kept, the tag is not
	closeA bool   // a link was opened inside this group
}

// sanitizeSVG rewrites Graphviz SVG output for inlining into a page: one
// root <svg> with only width, height and viewBox (plus the given class and
// label), allowlisted elements and attributes, values without url(…) or
// script, every text and value escaped anew. Links in the input are
// dropped (their content kept); the only links are those of links, to this
// UI's own /ui/contexts/ paths, wrapped around the node they belong to
// with their tooltip as <title>.
func sanitizeSVG(raw []byte, class, label string, links *svgLinks) (string, error) {
	dec := xml.NewDecoder(bytes.NewReader(raw))
	dec.Strict = true
	dec.Entity = xml.HTMLEntity
	var out strings.Builder
	out.Grow(len(raw) + len(raw)/4)
	var stack []svgFrame
	skip := 0 // > 0 while inside a dropped element
	roots := 0
	capturing := false // inside a <title>
	var title strings.Builder
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("%w: %v", errUnsafeSVG, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if skip > 0 {
				skip++
				continue
			}
			if capturing {
				return "", fmt.Errorf("%w: element inside <title>", errUnsafeSVG)
			}
			name := t.Name.Local
			if t.Name.Space != "" && t.Name.Space != svgNS {
				skip = 1
				continue
			}
			if name == "title" && len(stack) > 0 {
				capturing = true
				title.Reset()
				continue
			}
			if name == "a" && len(stack) > 0 {
				stack = append(stack, svgFrame{name: "a", unwrap: true})
				continue
			}
			if !svgElements[name] || name == "a" {
				skip = 1
				continue
			}
			if len(stack) == 0 {
				if name != "svg" || roots > 0 {
					return "", fmt.Errorf("%w: root element %q", errUnsafeSVG, name)
				}
				roots++
			} else if name == "svg" {
				skip = 1
				continue
			}
			if len(stack) >= maxSVGDepth {
				return "", fmt.Errorf("%w: nesting deeper than %d", errUnsafeSVG, maxSVGDepth)
			}
			frame := svgFrame{name: name}
			out.WriteString("<" + name)
			if name == "svg" {
				out.WriteString(` xmlns="` + svgNS + `"`)
				writeAttr(&out, "class", class)
				if links == nil {
					// A picture without links is an image to assistive
					// technology; one with links stays a group of them.
					writeAttr(&out, "role", "img")
				}
				writeAttr(&out, "aria-label", label)
			}
			for _, a := range t.Attr {
				an, av := a.Name, a.Value
				if an.Space != "" || !svgAttrs[an.Local] {
					continue
				}
				if name == "svg" && an.Local != "width" && an.Local != "height" && an.Local != "viewBox" {
					continue
				}
				if !safeValue(an.Local, av) {
					continue
				}
				if name == "g" && an.Local == "class" {
					switch {
					case strings.HasPrefix(av, "node "), av == "node":
						frame.kind = "node"
					case strings.HasPrefix(av, "edge "), av == "edge":
						frame.kind = "edge"
					}
				}
				if an.Local == "id" {
					// Graphviz numbers ids per picture (graph0, node1…);
					// the class keeps two pictures on a page apart.
					av = class + "-" + av
				}
				writeAttr(&out, an.Local, av)
			}
			out.WriteString(">")
			stack = append(stack, frame)
		case xml.EndElement:
			if skip > 0 {
				skip--
				continue
			}
			if capturing {
				capturing = false
				if links == nil || len(stack) == 0 {
					continue
				}
				top := &stack[len(stack)-1]
				switch top.kind {
				case "node":
					if l, ok := links.nodes[title.String()]; ok && !top.closeA && localHref(l.href) {
						out.WriteString("<a")
						writeAttr(&out, "href", l.href)
						out.WriteString("><title>")
						escapeXML(&out, l.title)
						out.WriteString("</title>")
						top.closeA = true
					}
				case "edge":
					if tip, ok := links.edges[title.String()]; ok {
						out.WriteString("<title>")
						escapeXML(&out, tip)
						out.WriteString("</title>")
					}
				}
				continue
			}
			if len(stack) == 0 {
				return "", fmt.Errorf("%w: unbalanced end tag", errUnsafeSVG)
			}
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if top.unwrap {
				continue
			}
			if top.closeA {
				out.WriteString("</a>")
			}
			out.WriteString("</" + top.name + ">")
			if len(stack) == 0 {
				out.WriteString("\n")
			}
		case xml.CharData:
			if skip > 0 || len(stack) == 0 {
				continue
			}
			if capturing {
				title.Write(t)
				continue
			}
			if stack[len(stack)-1].name == "text" {
				escapeXML(&out, string(t))
			} else if len(bytes.TrimSpace(t)) == 0 && bytes.ContainsRune(t, '\n') {
				out.WriteString("\n")
			}
		}
		// Comments, processing instructions and the DOCTYPE are dropped.
	}
	if roots != 1 || len(stack) != 0 || capturing {
		return "", fmt.Errorf("%w: no complete <svg> root", errUnsafeSVG)
	}
	return out.String(), nil
}

// safeValue reports whether an attribute value is inert: no url(…)
// references, no script schemes, no markup, and ids and classes made of
// plain name characters only.
func safeValue(name, v string) bool {
	lv := strings.ToLower(v)
	if strings.Contains(lv, "url(") || strings.Contains(lv, "script:") || strings.ContainsAny(v, "<>") {
		return false
	}
	if name == "id" || name == "class" {
		for _, r := range v {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == ' ' || r == '.') {
				return false
			}
		}
	}
	return true
}

// localHref reports whether href is a path of this UI's context pages:
// it starts with /ui/contexts/, has no scheme, host, backslash, space or
// control character.
func localHref(href string) bool {
	if !strings.HasPrefix(href, prefixCtx) {
		return false
	}
	for _, r := range href {
		if r <= ' ' || r == 0x7f || r == '\\' || r == '"' || r == '\'' || r == '<' || r == '>' {
			return false
		}
	}
	u, err := url.Parse(href)
	return err == nil && u.Scheme == "" && u.Host == "" && u.User == nil && strings.HasPrefix(u.Path, prefixCtx)
}

func writeAttr(b *strings.Builder, name, value string) {
	b.WriteString(" " + name + `="`)
	escapeXML(b, value)
	b.WriteString(`"`)
}

// escapeXML writes s with &, <, >, quotes and line breaks escaped, fit
// for both text content and double-quoted attribute values.
func escapeXML(b *strings.Builder, s string) {
	var buf bytes.Buffer
	_ = xml.EscapeText(&buf, []byte(s))
	b.Write(buf.Bytes())
}
