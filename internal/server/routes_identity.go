package server

// identityRoutes registers devices, secrets, member removal and app
// settings beyond code.
func (s *Server) identityRoutes() {
	s.api("POST /v1/devices", s.addDevice)
	s.api("GET /v1/devices", s.listDevices)
	s.api("DELETE /v1/devices/{name}", s.revokeDevice)

	const app = "/v1/apps/{owner}/{app}"
	s.api("PUT "+app+"/secrets/{name}", s.setSecret)
	s.api("GET "+app+"/secrets", s.listSecrets)
	s.api("DELETE "+app+"/secrets/{name}", s.removeSecret)
	s.api("DELETE "+app+"/members/{user}", s.removeMember)
}
