package ownership

func (c *cluster) dump() string {
	s := ""
	for id, n := range c.nodes {
		m := n.own.Holder().Load()
		v := uint64(0)
		if m != nil {
			v = m.Version
		}
		ok, why := n.own.Ready()
		s += id + ": state=" + n.store.State().String() + " v=" + itoa(v) + " owned=" + itoa(uint64(len(n.own.Owned()))) + " ready=" + map[bool]string{true: "y", false: "n"}[ok] + " " + why + "\n"
		if m != nil {
			for _, a := range m.Shards {
				s += a.Owner + ","
			}
			s += "\n"
		}
	}
	return s
}

func itoa(v uint64) string {
	b := []byte{}
	if v == 0 {
		return "0"
	}
	for v > 0 {
		b = append([]byte{byte('0' + v%10)}, b...)
		v /= 10
	}
	return string(b)
}
