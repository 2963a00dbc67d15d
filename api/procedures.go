package api

import (
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// apiMethods returns every method of every service of the API (package
// cep.v1), from the generated descriptors (registered by package cepv1,
// which the handlers import).
func apiMethods() []protoreflect.MethodDescriptor {
	var out []protoreflect.MethodDescriptor
	protoregistry.GlobalFiles.RangeFilesByPackage("cep.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := 0; i < fd.Services().Len(); i++ {
			sd := fd.Services().Get(i)
			for j := 0; j < sd.Methods().Len(); j++ {
				out = append(out, sd.Methods().Get(j))
			}
		}
		return true
	})
	return out
}

// procedureOf is a method's procedure, its URL path:
// "/cep.v1.PatternService/DeployPattern".
func procedureOf(md protoreflect.MethodDescriptor) string {
	return "/" + string(md.Parent().FullName()) + "/" + string(md.Name())
}
