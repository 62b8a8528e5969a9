package feel

// fromAi is Camunda's tag for a value an AI agent supplies (a tool's
// parameter in an ad-hoc subprocess): at run time it returns its first
// argument unchanged. The other arguments describe the value for whoever
// builds the tool's schema (the agent's job worker); like Camunda, they must
// be null or constants of their type, which is checked here when the call is
// evaluated.
func init() {
	def("fromAi", [][]string{
		{"value"},
		{"value", "description"},
		{"value", "description", "type"},
		{"value", "description", "type", "schema"},
		{"value", "description", "type", "schema", "options"},
	}, func(_ *evalCtx, a args) (any, error) {
		for i := 1; i < len(a.v); i++ {
			if !a.has(i) {
				continue
			}
			var err error
			if i <= 2 {
				_, err = a.str(i)
			} else {
				_, err = a.context(i)
			}
			if err != nil {
				return nil, err
			}
		}
		return a.v[0], nil
	})
}
