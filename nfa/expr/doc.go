// Package expr compiles and evaluates the CEL expressions used as pattern
// conditions and as key, time and emit expressions.
package expr
