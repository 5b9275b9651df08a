package recipe

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/edgepipe/edgepipe/internal/remote"
)

// publishList reads a target's publish: list. Each entry is a destination
// string or {url, insecure}; a destination that edgepipe could not push to
// is reported at its own line and column.
func (p *parser) publishList(v *yaml.Node, path string) []PublishTo {
	d := deref(v)
	if isNull(d) {
		return nil
	}
	if d.Kind != yaml.SequenceNode {
		hint := ""
		if d.Kind == yaml.ScalarNode {
			hint = fmt.Sprintf("write a list, even of one: publish: [%q]", d.Value)
		}
		p.report(v, hint, "%s must be a list of destinations (%s), got %s", path, remote.Forms, describe(v))
		return nil
	}
	var out []PublishTo
	for i, item := range d.Content {
		at := fmt.Sprintf("%s[%d]", path, i)
		dest := PublishTo{Pos: p.pos(item)}
		urlNode := item
		if deref(item).Kind == yaml.MappingNode {
			got := p.object(item, at, []field{
				{"url", func(_, v *yaml.Node) {
					if s, ok := p.str(v, at+".url"); ok {
						dest.URL, urlNode = s, v
					}
				}},
				{"insecure", func(_, v *yaml.Node) { dest.Insecure, _ = p.boolean(v, at+".insecure") }},
			})
			if got != nil && got["url"] == nil {
				p.report(item, "add url: oci://HOST/REPOSITORY:TAG", "%s has no url", at)
			}
		} else if s, ok := p.str(item, at); ok {
			dest.URL = s
		}
		if dest.URL == "" {
			continue
		}
		if _, err := remote.Parse(dest.URL, dest.Insecure); err != nil {
			p.report(urlNode, "", "%s: %v", at, err)
			continue
		}
		out = append(out, dest)
	}
	return out
}

// checkPublishClashes reports two targets (or one target twice) pushing to
// the same place: the second push would replace the first.
func (p *parser) checkPublishClashes(targets []Target) {
	first := map[string]string{}
	for _, t := range targets {
		for _, pt := range t.Publish {
			d, err := remote.Parse(pt.URL, pt.Insecure)
			if err != nil {
				continue
			}
			where := d.Where(t.Name)
			if prev, ok := first[where]; ok {
				p.add(Diagnostic{Pos: pt.Pos,
					Msg:  fmt.Sprintf("target %s publishes to %s, which target %s already publishes to: the second push would replace the first", t.Name, where, prev),
					Hint: "give each target its own tag (oci://HOST/REPO:TAG) or prefix, or leave the tag out to use the target's name"})
				continue
			}
			first[where] = t.Name
		}
	}
}
