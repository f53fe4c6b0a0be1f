package server

// fetchRoutes registers the apps' own HTTP lane: backend.js fetch at
// /apps/{owner}/{name}/api/*.
func (s *Server) fetchRoutes() {}
