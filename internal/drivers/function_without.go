//go:build osb_without_function

package drivers

func functionKind() Kind { return omitted("function") }
