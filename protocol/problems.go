package protocol

// Problems lists the problems a Validate error joins (errors.Join): one for
// an error that joins none, none for nil. Every Validate in the project
// returns all its problems so, and its callers list them with this.
func Problems(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
