package rules

import (
	"github.com/ai-flock/ai-flock/protocol"
)

// stackServicesApart: the flock's services (role services) hold the board's
// bus user. On docker they join only their own internal network (the bus
// nodes join it by their link steps), and no other container joins it:
// nothing but the bus reaches them, and they reach nothing but the bus.
// (Published ports are container-published-ports'.)
func stackServicesApart(rs []Resource) []Finding {
	const fix = "attach the services container only to its own internal <flock>-services-net (labelled ai-flock.role=services), as infra/dockerflock does"
	nets := map[string]Resource{}
	for _, n := range byTypeSorted(rs, TypeNetwork) {
		if name := str(n.get("name")); name != "" {
			nets[name] = n
		}
	}
	var out []Finding
	for _, c := range byTypeSorted(rs, TypeContainer) {
		l := dockerLabels(c)
		services := l[protocol.LabelRole] == protocol.RoleServices
		for _, a := range list(c.get("networksAdvanced")) {
			nameV := get(a, "name")
			if isUnknown(nameV) {
				continue
			}
			n, ok := nets[str(nameV)]
			own := ok && dockerLabels(n)[protocol.LabelRole] == protocol.RoleServices
			switch {
			case services && !own:
				out = append(out, c.finding(fix, "puts the services on the network %q, which is not their own: they would reach, or be reached by, more than the bus", str(nameV)))
			case services && !isUnknown(n.get("internal")) && !truthy(n.get("internal")):
				out = append(out, c.finding(fix, "puts the services on %q, which is not internal: they would have a route out", str(nameV)))
			case !services && own:
				out = append(out, c.finding(fix, "joins the services' network %q (only the services, and the bus by its link steps, may)", str(nameV)))
			}
		}
	}
	return out
}
