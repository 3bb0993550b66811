package nodetest

// Fragments returns every 12-character piece of each secret (the whole
// secret when shorter): the pieces no output may contain.
func Fragments(secrets ...string) []string {
	var out []string
	for _, s := range secrets {
		if len(s) < 12 {
			out = append(out, s)
			continue
		}
		for i := 0; i+12 <= len(s); i++ {
			out = append(out, s[i:i+12])
		}
	}
	return out
}
