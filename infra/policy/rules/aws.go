package rules

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"path"
	"regexp"
	"strings"

	"github.com/ai-flock/ai-flock/infra/awsrules"
)

// containerDefs decodes a task definition's containerDefinitions (a JSON
// string input). unknown is true while the value is not known (preview).
func containerDefs(r Resource) (defs []map[string]any, unknown bool, err error) {
	v := r.get("containerDefinitions")
	var raw []any
	switch x := v.(type) {
	case Unknown:
		return nil, true, nil
	case nil:
		return nil, false, fmt.Errorf("containerDefinitions is not set")
	case string:
		if err := json.Unmarshal([]byte(x), &raw); err != nil {
			return nil, false, fmt.Errorf("containerDefinitions is not a JSON list of container definitions: %v", err)
		}
	case []any:
		raw = x
	default:
		return nil, false, fmt.Errorf("containerDefinitions is a %T, not a JSON list", v)
	}
	for _, e := range raw {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, false, fmt.Errorf("containerDefinitions holds %v, not a container definition", e)
		}
		defs = append(defs, m)
	}
	return defs, false, nil
}

// eachContainer runs check over every container definition of a task
// definition; a definition that cannot be read is a finding of every rule
// that needs it, since none of them can vouch for it.
func eachContainer(r Resource, fix string, check func(name string, c map[string]any) []Finding) []Finding {
	defs, unknown, err := containerDefs(r)
	if unknown {
		return nil
	}
	if err != nil {
		return []Finding{r.finding(fix, "%v", err)}
	}
	var out []Finding
	for _, c := range defs {
		out = append(out, check(str(c["name"]), c)...)
	}
	return out
}

func ecsTaskAWSVPC(r Resource) []Finding {
	v := r.get("networkMode")
	if isUnknown(v) || str(v) == "awsvpc" {
		return nil
	}
	return []Finding{r.finding(`set networkMode: "awsvpc" so each task has its own network interface and security groups`,
		"networkMode is %s, not awsvpc: the task would share its host's network", describe(v))}
}

func ecsTaskNonRootUser(r Resource) []Finding {
	const fix = `set user in every container definition to the agent's own non-root numeric "UID:GID" from the flock model`
	return eachContainer(r, fix, func(name string, c map[string]any) []Finding {
		v := c["user"]
		user := strings.TrimSpace(str(v))
		if user == "" {
			return []Finding{r.finding(fix, "container %q has no user, so it runs as its image's default user (often root)", name)}
		}
		uid, gid, ok := parseUser(user)
		switch {
		case !ok:
			return []Finding{r.finding(fix, "container %q: user %q is not a numeric UID:GID; a user name can resolve to root inside the image", name, user)}
		case uid == 0 || gid == 0:
			return []Finding{r.finding(fix, "container %q runs as root (user %q)", name, user)}
		}
		return nil
	})
}

func ecsTaskReadOnlyRootfs(r Resource) []Finding {
	const fix = "set readonlyRootFilesystem: true in every container definition; give scratch space through the agent's own EFS access point or an ephemeral volume"
	return eachContainer(r, fix, func(name string, c map[string]any) []Finding {
		if truthy(c["readonlyRootFilesystem"]) {
			return nil
		}
		return []Finding{r.finding(fix, "container %q has a writable root filesystem (readonlyRootFilesystem is %s)", name, describe(c["readonlyRootFilesystem"]))}
	})
}

func ecsTaskNotPrivileged(r Resource) []Finding {
	const fix = "remove privileged from the container definition (Fargate refuses it anyway)"
	return eachContainer(r, fix, func(name string, c map[string]any) []Finding {
		if !truthy(c["privileged"]) {
			return nil
		}
		return []Finding{r.finding(fix, "container %q runs privileged", name)}
	})
}

func ecsTaskDropAllCapabilities(r Resource) []Finding {
	const fix = `set linuxParameters.capabilities {drop: ["ALL"]} in every container definition and add none`
	return eachContainer(r, fix, func(name string, c map[string]any) []Finding {
		caps := get(c, "linuxParameters", "capabilities")
		var out []Finding
		all := false
		for _, d := range strs(get(caps, "drop")) {
			if strings.EqualFold(strings.TrimPrefix(strings.ToUpper(d), "CAP_"), "ALL") {
				all = true
			}
		}
		if !all {
			out = append(out, r.finding(fix, "container %q does not drop all capabilities (linuxParameters.capabilities.drop is %s)", name, describe(get(caps, "drop"))))
		}
		if add := list(get(caps, "add")); len(add) > 0 {
			out = append(out, r.finding(fix, "container %q adds the capabilities %v", name, add))
		}
		return out
	})
}

func ecsTaskMemoryLimits(r Resource) []Finding {
	return r.mustBePositive("memory", "set the task's memory (MiB) from the agent's memoryMiB limit",
		"the task has no memory limit (memory is %s)")
}

func ecsTaskLogging(r Resource) []Finding {
	const fix = "set logConfiguration {logDriver: awslogs, options: {awslogs-group: <the flock's log group>, awslogs-region, awslogs-stream-prefix}} in every container definition"
	return eachContainer(r, fix, func(name string, c map[string]any) []Finding {
		d := str(get(c, "logConfiguration", "logDriver"))
		if d != "" && d != "none" {
			return nil
		}
		return []Finding{r.finding(fix, "container %q has no log driver, so its logs are lost", name)}
	})
}

var (
	secretName   = regexp.MustCompile(`(?i)(secret|passw(or)?d|token|seed|private[_-]?key|api[_-]?key|access[_-]?key|credential|nkey|jwt)`)
	secretValues = []struct {
		what string
		re   *regexp.Regexp
	}{
		{"an nkey seed", regexp.MustCompile(`\bS[UOANCXP][A-Z2-7]{50,}`)},
		{"an AWS access key", regexp.MustCompile(`\b(AKIA|ASIA)[A-Z0-9]{16}\b`)},
		{"a private key", regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----`)},
		{"a GitHub token", regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{30,}`)},
		{"a JWT", regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.`)},
		// A proxy or remote URL with a password in it (http://agent:<token>@...).
		{"a URL with a password in it", regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^/@\s:]*:[^/@\s]+@`)},
	}
)

// reference reports whether an environment value points at a secret
// (a file path, an ARN) rather than being one.
func reference(v string) bool {
	return strings.HasPrefix(v, "/") || strings.HasPrefix(v, "arn:")
}

func ecsTaskNoSecretEnv(r Resource) []Finding {
	const fix = "move the value to the container's secrets (valueFrom a Secrets Manager secret or SSM SecureString parameter) and read it from there"
	return eachContainer(r, fix, func(name string, c map[string]any) []Finding {
		var out []Finding
		for _, e := range list(c["environment"]) {
			m := obj(e)
			k, v := str(m["name"]), str(m["value"])
			if v == "" {
				continue
			}
			what := ""
			for _, s := range secretValues {
				if s.re.MatchString(v) {
					what = s.what
					break
				}
			}
			if what == "" && secretName.MatchString(k) && !reference(v) {
				what = "a secret-looking value"
			}
			if what != "" { // never echo the value itself
				out = append(out, r.finding(fix, "container %q has %s in its plain environment (variable %s), readable in the task definition by anyone who can describe it", name, what, k))
			}
		}
		return out
	})
}

func efsVolumes(r Resource) []map[string]any {
	var out []map[string]any
	for _, v := range list(r.get("volumes")) {
		if m := obj(v); obj(m["efsVolumeConfiguration"]) != nil {
			out = append(out, m)
		}
	}
	return out
}

func ecsTaskEFSEncryptionIAM(r Resource) []Finding {
	if isUnknown(r.get("volumes")) {
		return nil
	}
	const fix = `set efsVolumeConfiguration.transitEncryption: "ENABLED" and authorizationConfig.iam: "ENABLED" on every EFS volume`
	var out []Finding
	for _, v := range efsVolumes(r) {
		efs := v["efsVolumeConfiguration"]
		if te := get(efs, "transitEncryption"); !isUnknown(te) && str(te) != "ENABLED" {
			out = append(out, r.finding(fix, "EFS volume %q is mounted without transit encryption (transitEncryption is %s)", str(v["name"]), describe(te)))
		}
		if iam := get(efs, "authorizationConfig", "iam"); !isUnknown(iam) && str(iam) != "ENABLED" {
			out = append(out, r.finding(fix, "EFS volume %q is mounted without IAM authorization (authorizationConfig.iam is %s), so the task role does not limit what it may mount", str(v["name"]), describe(iam)))
		}
	}
	return out
}

func ecsTaskEFSAccessPoint(r Resource) []Finding {
	if isUnknown(r.get("volumes")) {
		return nil
	}
	const fix = "mount EFS only through an access point (authorizationConfig.accessPointId): the agent's own, or common read-only"
	var out []Finding
	for _, v := range efsVolumes(r) {
		ap := get(v["efsVolumeConfiguration"], "authorizationConfig", "accessPointId")
		if isUnknown(ap) || str(ap) != "" {
			continue
		}
		out = append(out, r.finding(fix, "EFS volume %q mounts the file system without an access point, so it is confined to no directory and no POSIX user", str(v["name"])))
	}
	return out
}

func ecsServiceNoPublicIP(r Resource) []Finding {
	v := r.get("networkConfiguration", "assignPublicIp")
	if !truthy(v) {
		return nil
	}
	return []Finding{r.finding("set networkConfiguration.assignPublicIp: false and reach AWS through VPC endpoints or a NAT gateway",
		"assigns public IPs to its tasks (networkConfiguration.assignPublicIp is true)")}
}

func vpcEndpointOwnAccount(r Resource) []Finding {
	const fix = "give every interface endpoint a policy that allows this account's callers only (Condition StringEquals aws:PrincipalAccount: the account)"
	if t := r.get("vpcEndpointType"); isUnknown(t) || str(t) != "Interface" {
		return nil
	}
	v := r.get("policy")
	if isUnknown(v) {
		return nil
	}
	if strings.TrimSpace(str(v)) == "" {
		return []Finding{r.finding(fix, "the interface endpoint has no policy: AWS attaches its default, full access for callers of any account, a way out of the VPC")}
	}
	var doc struct {
		Statement json.RawMessage
	}
	type statement struct {
		Effect    string
		Condition map[string]map[string]any
	}
	var sts []statement
	if err := json.Unmarshal([]byte(str(v)), &doc); err != nil {
		return []Finding{r.finding(fix, "the endpoint policy is not a JSON policy document: %v", err)}
	}
	if json.Unmarshal(doc.Statement, &sts) != nil {
		var one statement
		if err := json.Unmarshal(doc.Statement, &one); err != nil {
			return []Finding{r.finding(fix, "the endpoint policy's Statement is neither a statement nor a list of them")}
		}
		sts = []statement{one}
	}
	for i, st := range sts {
		if st.Effect == "Allow" && str(st.Condition["StringEquals"]["aws:PrincipalAccount"]) == "" {
			return []Finding{r.finding(fix, "statement %d of the endpoint policy allows callers of any account (no StringEquals aws:PrincipalAccount)", i+1)}
		}
	}
	return nil
}

func efsEncrypted(r Resource) []Finding {
	return r.mustBeTrue("encrypted", "set encrypted: true (optionally with your own kmsKeyId)",
		"the file system is not encrypted at rest (encrypted is %s)")
}

func efsAccessPointPosixUser(r Resource) []Finding {
	pu := r.get("posixUser")
	if isUnknown(pu) {
		return nil
	}
	const fix = "set posixUser {uid, gid} to the agent's own non-root UID and GID (common and the bus: their own non-root IDs)"
	uidV, gidV := get(pu, "uid"), get(pu, "gid")
	if isUnknown(uidV) || isUnknown(gidV) {
		return nil
	}
	uid, okU := number(uidV)
	gid, okG := number(gidV)
	switch {
	case pu == nil || !okU || !okG:
		return []Finding{r.finding(fix, "has no POSIX user (posixUser is %s), so every client acts as whatever user it claims", describe(pu))}
	case uid == 0 || gid == 0:
		return []Finding{r.finding(fix, "forces the POSIX user %v:%v, which is root", uid, gid)}
	}
	return nil
}

func efsAccessPointRootPath(r Resource) []Finding {
	v := r.get("rootDirectory", "path")
	if isUnknown(v) {
		return nil
	}
	if p := str(v); p != "" && path.Clean(p) != "/" {
		return nil
	}
	return []Finding{r.finding("set rootDirectory.path to the one directory it serves (an agent: /agents/<id>, with creationInfo owned by its UID and permissions 0700)",
		"its root directory is %s: it exposes the whole file system", describe(v))}
}

func worldCIDR(c string) bool {
	p, err := netip.ParsePrefix(strings.TrimSpace(c))
	return err == nil && p.Bits() == 0
}

// worldCIDRs are the CIDRs among the values (each a CIDR or a list of
// them) that admit every address.
func worldCIDRs(vs ...any) []string {
	var hits []string
	for _, v := range vs {
		for _, c := range append(strs(v), str(v)) {
			if worldCIDR(c) {
				hits = append(hits, c)
			}
		}
	}
	return hits
}

func securityGroupNoWorldIngress(r Resource) []Finding {
	const fix = "admit only the flock's own security groups (referencedSecurityGroupId / sourceSecurityGroupId), never 0.0.0.0/0 or ::/0"
	var out []Finding
	ports := func(m map[string]any) string {
		return fmt.Sprintf("ports %s-%s", describe(m["fromPort"]), describe(m["toPort"]))
	}
	switch r.Type {
	case awsrules.TypeSecurityGroup:
		for _, in := range list(r.get("ingress")) {
			m := obj(in)
			for _, c := range worldCIDRs(m["cidrBlocks"], m["ipv6CidrBlocks"]) {
				out = append(out, r.finding(fix, "an ingress rule (%s) admits %s, the whole internet", ports(m), c))
			}
		}
	case awsrules.TypeSGIngressRule:
		for _, c := range worldCIDRs(r.get("cidrIpv4"), r.get("cidrIpv6")) {
			out = append(out, r.finding(fix, "admits %s (%s), the whole internet", c, ports(r.Props)))
		}
	case awsrules.TypeSecurityGroupRule:
		if str(r.get("type")) == "ingress" {
			for _, c := range worldCIDRs(r.get("cidrBlocks"), r.get("ipv6CidrBlocks")) {
				out = append(out, r.finding(fix, "admits %s (%s), the whole internet", c, ports(r.Props)))
			}
		}
	}
	return out
}

func logGroupRetention(r Resource) []Finding {
	return r.mustBePositive("retentionInDays", "set retentionInDays (for example 30) so logs are kept no longer than needed and their cost is bounded",
		"keeps logs forever (retentionInDays is %s)")
}
