package client

// Ptr is a pointer to v, for the generated types' optional fields and
// parameters, which are pointers: &client.ListJobsParams{Limit: client.Ptr(200)}.
func Ptr[T any](v T) *T { return &v }
