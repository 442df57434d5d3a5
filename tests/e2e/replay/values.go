package replay

// Reading the plain values of a resource's inputs (Inputs): each reader
// gives the zero value for a value of another type. The Fargate replay
// (tests/fargate) reads its capture with them too.

// Str is v as a string.
func Str(v any) string {
	s, _ := v.(string)
	return s
}

// Num is v, a JSON number, as an int.
func Num(v any) int {
	f, _ := v.(float64)
	return int(f)
}

// List is v as a list.
func List(v any) []any {
	l, _ := v.([]any)
	return l
}

// Strs is v, a list, as strings.
func Strs(v any) []string {
	var out []string
	for _, e := range List(v) {
		out = append(out, Str(e))
	}
	return out
}

// StrMap is v, an object, as a map of strings.
func StrMap(v any) map[string]string {
	out := map[string]string{}
	if m, ok := v.(map[string]any); ok {
		for k, e := range m {
			out[k] = Str(e)
		}
	}
	return out
}
