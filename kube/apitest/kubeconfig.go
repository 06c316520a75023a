package apitest

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WriteKubeconfig writes a kubeconfig file at path for cfg (Admin or
// Node): the server's URL and certificate and cfg's bearer token, as the
// only context, for programs that take -kubeconfig.
func WriteKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["apitest"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.TLSClientConfig.CAData,
		TLSServerName:            cfg.TLSClientConfig.ServerName,
	}
	kc.AuthInfos["apitest"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["apitest"] = &clientcmdapi.Context{Cluster: "apitest", AuthInfo: "apitest"}
	kc.CurrentContext = "apitest"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("apitest: writing kubeconfig: %w", err)
	}
	return nil
}
